/* Switchboard web chat widget.
 *
 * Embed with one tag:  <script src="https://your-gateway/widget.js" async></script>
 * Options (data- attributes on the tag): data-title, data-greeting, data-mode="page" (full page).
 * The session (id + token) is kept in localStorage, so the conversation survives page reloads.
 * A reply's knowledge-base sources show under it as an expandable list ([n] Title, linked when known).
 * Each bot reply can be rated 👍 / 👎 (a vote can be changed); 👎 asks for an optional comment.
 */
(function () {
  "use strict";
  var script = document.currentScript || document.querySelector('script[src*="widget.js"]');
  var base = new URL(script.src, location.href).origin;
  var opts = {
    title: script.getAttribute("data-title") || "Chat with us",
    greeting: script.getAttribute("data-greeting") || "Hi! How can I help you today?",
    page: script.getAttribute("data-mode") === "page",
  };
  var storeKey = "switchboard:" + base;

  var css = [
    ".sb-root{--sb-accent:#2f5bea;--sb-bg:#fff;--sb-fg:#1b1f24;--sb-muted:#5b6470;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--sb-fg)}",
    ".sb-launcher{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;background:var(--sb-accent);color:#fff;cursor:pointer;box-shadow:0 4px 14px rgba(0,0,0,.25);z-index:2147483000;display:flex;align-items:center;justify-content:center}",
    ".sb-launcher:focus-visible,.sb-send:focus-visible,.sb-close:focus-visible{outline:3px solid #ffbf47;outline-offset:2px}",
    ".sb-panel{position:fixed;right:20px;bottom:88px;width:370px;max-width:calc(100vw - 24px);height:560px;max-height:calc(100vh - 110px);display:flex;flex-direction:column;background:var(--sb-bg);border-radius:14px;box-shadow:0 8px 30px rgba(0,0,0,.25);overflow:hidden;z-index:2147483000}",
    ".sb-panel[hidden]{display:none}",
    ".sb-page .sb-panel{position:static;width:100%;max-width:760px;height:100vh;max-height:none;margin:0 auto;border-radius:0;box-shadow:none}",
    ".sb-header{display:flex;align-items:center;justify-content:space-between;padding:12px 16px;background:var(--sb-accent);color:#fff}",
    ".sb-header h2{margin:0;font-size:16px;font-weight:600}",
    ".sb-close{background:transparent;border:0;color:#fff;font-size:22px;cursor:pointer;line-height:1}",
    ".sb-log{flex:1;overflow-y:auto;padding:16px;display:flex;flex-direction:column;gap:10px;background:#f5f6f8}",
    ".sb-msg{max-width:85%;padding:9px 13px;border-radius:14px;white-space:pre-wrap;word-wrap:break-word}",
    ".sb-user{align-self:flex-end;background:var(--sb-accent);color:#fff;border-bottom-right-radius:4px}",
    ".sb-agent{align-self:flex-start;background:#fff;border:1px solid #e1e4e8;border-bottom-left-radius:4px}",
    ".sb-operator{align-self:flex-start;background:#fff8e1;border:1px solid #f0d48a;border-bottom-left-radius:4px}",
    ".sb-author{align-self:flex-start;margin:0 0 -6px 4px;font-size:12px;font-weight:600;color:var(--sb-muted)}",
    ".sb-notice{align-self:center;font-size:12px;color:var(--sb-muted);text-align:center}",
    ".sb-typing{align-self:flex-start;color:var(--sb-muted);font-style:italic}",
    ".sb-error{margin:0 16px 8px;padding:8px 12px;border-radius:8px;background:#fde8e8;color:#8a1c1c}",
    ".sb-error:empty{display:none}",
    ".sb-form{display:flex;gap:8px;padding:10px;border-top:1px solid #e1e4e8;background:#fff}",
    ".sb-input{flex:1;resize:none;border:1px solid #c9ced6;border-radius:10px;padding:9px 11px;font:inherit;min-height:22px;max-height:120px}",
    ".sb-input:focus{outline:2px solid var(--sb-accent);border-color:transparent}",
    ".sb-send{border:0;border-radius:10px;padding:0 16px;background:var(--sb-accent);color:#fff;font:inherit;font-weight:600;cursor:pointer}",
    ".sb-send:disabled{opacity:.55;cursor:default}",
    ".sb-mic{border:1px solid #c9ced6;border-radius:10px;padding:0 10px;background:#fff;font:inherit;cursor:pointer}",
    ".sb-mic[aria-pressed=true]{background:#c62828;color:#fff;border-color:#c62828}",
    ".sb-mic:disabled{opacity:.55;cursor:default}",
    ".sb-sources{align-self:flex-start;max-width:85%;margin-top:-4px;font-size:13px;color:var(--sb-muted)}",
    ".sb-sources summary{cursor:pointer}",
    ".sb-sources ol{margin:4px 0 0;padding-left:18px;list-style:none}",
    ".sb-sources li{margin:2px 0}",
    ".sb-sources .sb-cited{font-weight:600}",
    ".sb-sources a{color:var(--sb-accent)}",
    ".sb-rate{align-self:flex-start;display:flex;gap:4px;align-items:center;margin-top:-6px;font-size:12px;color:var(--sb-muted)}",
    ".sb-rate button{border:1px solid transparent;background:transparent;border-radius:6px;padding:1px 5px;font-size:14px;cursor:pointer;opacity:.6}",
    ".sb-rate button:hover,.sb-rate button[aria-pressed=true]{opacity:1;border-color:#c9ced6;background:#fff}",
    ".sb-rate button:focus-visible{outline:2px solid var(--sb-accent)}",
    ".sb-choices{align-self:flex-start;display:flex;gap:6px}",
    ".sb-choice{border:1px solid var(--sb-accent);background:#fff;color:var(--sb-accent);border-radius:14px;padding:4px 14px;font:inherit;cursor:pointer}",
    ".sb-choice:focus-visible{outline:2px solid var(--sb-accent)}",
    ".sb-comment{align-self:flex-start;display:flex;flex-direction:column;gap:6px;width:85%}",
    ".sb-comment textarea{border:1px solid #c9ced6;border-radius:8px;padding:6px 8px;font:inherit;font-size:13px;resize:vertical;min-height:40px}",
    ".sb-comment div{display:flex;gap:6px}",
    ".sb-comment button{border:0;border-radius:8px;padding:4px 10px;font:inherit;font-size:13px;cursor:pointer;background:var(--sb-accent);color:#fff}",
    ".sb-comment button.sb-skip{background:#e1e4e8;color:var(--sb-fg)}",
    ".sb-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}",
    "@media (max-width:480px){.sb-panel{right:0;bottom:0;width:100vw;max-width:100vw;height:100vh;max-height:100vh;border-radius:0}}",
  ].join("\n");

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text) node.textContent = text;
    return node;
  }

  // A drawn speech bubble, not an emoji: a system without an emoji font shows an empty box for those.
  function bubbleIcon() {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24"); svg.setAttribute("width", "28"); svg.setAttribute("height", "28");
    svg.setAttribute("aria-hidden", "true"); svg.setAttribute("focusable", "false"); svg.setAttribute("class", "sb-icon");
    var path = document.createElementNS(ns, "path");
    path.setAttribute("fill", "currentColor");
    path.setAttribute("d", "M5 3h14a3 3 0 0 1 3 3v9a3 3 0 0 1-3 3h-8l-5 4v-4H5a3 3 0 0 1-3-3V6a3 3 0 0 1 3-3z");
    svg.appendChild(path);
    return svg;
  }

  var root = el("div", { class: "sb-root" + (opts.page ? " sb-page" : ""), "data-switchboard": "" });
  var style = el("style");
  style.textContent = css;
  var panel = el("section", { class: "sb-panel", role: "dialog", "aria-label": opts.title });
  var header = el("div", { class: "sb-header" });
  header.appendChild(el("h2", {}, opts.title));
  var close = el("button", { class: "sb-close", type: "button", "aria-label": "Close chat" }, "\u00d7");
  if (!opts.page) header.appendChild(close);
  var log = el("div", { class: "sb-log", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  var error = el("div", { class: "sb-error", role: "alert" });
  var form = el("form", { class: "sb-form" });
  var label = el("label", { for: "sb-input", class: "sb-sr" }, "Your message");
  var input = el("textarea", { id: "sb-input", class: "sb-input", rows: "1", placeholder: "Type a message\u2026", autocomplete: "off" });
  var send = el("button", { class: "sb-send", type: "submit" }, "Send");
  // The microphone (issue 44): a recording is sent to the session's voice route, transcribed and answered.
  var canRecord = !!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder);
  var mic = el("button", { class: "sb-mic", type: "button", "aria-label": "Record a voice message", "aria-pressed": "false" }, "\ud83c\udfa4");
  form.appendChild(label); form.appendChild(input);
  if (canRecord) form.appendChild(mic);
  form.appendChild(send);
  panel.appendChild(header); panel.appendChild(log); panel.appendChild(error); panel.appendChild(form);
  var launcher = el("button", { class: "sb-launcher", type: "button", "aria-label": "Open chat", "aria-expanded": "false" });
  launcher.appendChild(bubbleIcon());
  root.appendChild(style);
  root.appendChild(panel);
  if (!opts.page) { root.appendChild(launcher); panel.hidden = true; }

  var session = null;
  var socket = null;
  var pending = null; // {bubble, resolve}
  var busy = false;

  function scroll() { log.scrollTop = log.scrollHeight; }
  function bubble(role, text) {
    var node = el("div", { class: "sb-msg sb-" + role }, text);
    node.setAttribute("data-role", role);
    log.appendChild(node); scroll();
    return node;
  }
  function showSources(after, sources) {
    if (!sources || !sources.length) return;
    var box = el("details", { class: "sb-sources", "data-sources": "" });
    box.appendChild(el("summary", {}, "Sources (" + sources.length + ")"));
    var list = el("ol");
    sources.forEach(function (s) {
      var item = el("li", s.cited ? { class: "sb-cited" } : {});
      var label = "[" + s.n + "] " + s.title;
      if (s.url && /^https?:\/\//i.test(s.url)) {
        item.appendChild(el("a", { href: s.url, target: "_blank", rel: "noopener noreferrer" }, label));
      } else {
        item.textContent = label;
      }
      list.appendChild(item);
    });
    box.appendChild(list);
    after.insertAdjacentElement("afterend", box); scroll();
  }
  // 👍 / 👎 under a bot reply (its message id and conversation id known); 👎 opens an optional comment.
  function showRating(after, reply) {
    if (!reply || !reply.message_id || !reply.conversation_id) return after;
    var bar = el("div", { class: "sb-rate", "data-rate": reply.message_id });
    var up = el("button", { type: "button", "aria-label": "Helpful", "aria-pressed": "false", "data-rating": "up" }, "\ud83d\udc4d");
    var down = el("button", { type: "button", "aria-label": "Not helpful", "aria-pressed": "false", "data-rating": "down" }, "\ud83d\udc4e");
    var note = el("span", { class: "sb-rate-note", "aria-live": "polite" });
    bar.appendChild(up); bar.appendChild(down); bar.appendChild(note);
    var path = "/api/conversations/" + encodeURIComponent(reply.conversation_id) + "/messages/" +
      encodeURIComponent(reply.message_id) + "/feedback";
    var box = null;
    function vote(rating, comment) {
      var body = { rating: rating };
      if (comment) body.comment = comment;
      return api(path, { method: "POST", body: JSON.stringify(body), headers: { "X-Chat-Session": session.id } })
        .then(function () {
          up.setAttribute("aria-pressed", String(rating === "up"));
          down.setAttribute("aria-pressed", String(rating === "down"));
          note.textContent = "Thanks for your feedback.";
        })
        .catch(function (err) { note.textContent = "Could not send your rating: " + err.message; });
    }
    up.addEventListener("click", function () { if (box) { box.remove(); box = null; } vote("up"); });
    down.addEventListener("click", function () {
      vote("down").then(function () {
        if (box) return;
        box = el("form", { class: "sb-comment", "data-comment": reply.message_id });
        var text = el("textarea", { "aria-label": "What was wrong with this answer? (optional)", placeholder: "What was wrong? (optional)", maxlength: "2000" });
        var row = el("div");
        var submit = el("button", { type: "submit" }, "Send feedback");
        var skip = el("button", { type: "button", class: "sb-skip" }, "Skip");
        row.appendChild(submit); row.appendChild(skip);
        box.appendChild(text); box.appendChild(row);
        box.addEventListener("submit", function (ev) {
          ev.preventDefault();
          var comment = text.value.trim();
          var done = function () { if (box) { box.remove(); box = null; } };
          if (!comment) { done(); return; }
          vote("down", comment).then(done);
        });
        skip.addEventListener("click", function () { box.remove(); box = null; });
        bar.insertAdjacentElement("afterend", box); text.focus(); scroll();
      });
    });
    after.insertAdjacentElement("afterend", bar); scroll();
    return bar;
  }
  function showError(message) { error.textContent = message || ""; }
  function setBusy(on) { busy = on; send.disabled = on; mic.disabled = on && !recorder; }

  function loadSession() {
    try { return JSON.parse(localStorage.getItem(storeKey) || "null"); } catch (e) { return null; }
  }
  function api(path, init) {
    init = init || {};
    init.headers = Object.assign({ "Content-Type": "application/json" }, init.headers || {});
    if (session) init.headers.Authorization = "Bearer " + session.token;
    return fetch(base + path, init).then(function (resp) {
      return resp.json().catch(function () { return {}; }).then(function (body) {
        if (!resp.ok) { var err = new Error(body.message || ("HTTP " + resp.status)); err.status = resp.status; throw err; }
        return body;
      });
    });
  }
  function newSession() {
    session = null;
    return api("/api/chat/sessions", { method: "POST" }).then(function (s) {
      session = { id: s.session_id, token: s.token };
      localStorage.setItem(storeKey, JSON.stringify(session));
      bubble("agent", opts.greeting);
    });
  }
  function restore() {
    session = loadSession();
    if (!session) return newSession();
    return api("/api/chat/sessions/" + session.id + "/messages").then(function (t) {
      if (!t.messages.length) bubble("agent", opts.greeting);
      t.messages.forEach(function (m) { showMessage(m); });
    }).catch(function (err) {
      if (err.status === 404 || err.status === 401) return newSession();
      throw err;
    });
  }

  var shown = {};
  function showMessage(m) {
    if (m.id && shown[m.id]) return;
    if (m.id) shown[m.id] = true;
    if (m.role === "notice") { bubble("notice", m.text); return; }  // a person joined or left
    if (m.role === "operator" && m.author) {
      var name = el("div", { class: "sb-author", "data-author": "" }, m.author);
      log.appendChild(name);
    }
    var node = bubble(m.role === "user" ? "user" : (m.role === "operator" ? "operator" : "agent"), m.text);
    if (m.role === "agent") {
      showSources(node, m.sources);
      showRating(node.nextElementSibling && node.nextElementSibling.hasAttribute("data-sources") ? node.nextElementSibling : node,
        { message_id: m.id, conversation_id: m.conversation_id });
    }
  }

  function openSocket() {
    if (!("WebSocket" in window) || !session) return Promise.resolve(null);
    if (socket && socket.readyState === 1) return Promise.resolve(socket);
    return new Promise(function (resolve) {
      var url = base.replace(/^http/, "ws") + "/api/chat/sessions/" + session.id + "/ws?token=" + encodeURIComponent(session.token);
      var ws = new WebSocket(url);
      var settled = false;
      ws.onopen = function () { settled = true; socket = ws; resolve(ws); };
      ws.onerror = function () { if (!settled) { settled = true; resolve(null); } };
      ws.onclose = function () {
        socket = null;
        if (pending) { pending.fail("Connection lost. Please try again."); }
        if (settled) setTimeout(function () { if (!socket) openSocket(); }, 3000);  // keep listening
      };
      ws.onmessage = function (ev) {
        var frame = JSON.parse(ev.data);
        if (frame.type === "operator" || frame.type === "notice") { showMessage(frame.message); return; }  // a person
        if (!pending) return;
        if (frame.type === "delta") {
          if (pending.bubble.classList.contains("sb-typing")) {
            pending.bubble.className = "sb-msg sb-agent"; pending.bubble.textContent = "";
            pending.bubble.setAttribute("data-role", "agent");
          }
          pending.bubble.textContent += frame.text; scroll();
        } else if (frame.type === "progress") {  // a tool runs: say what the agent is doing until it is done
          if (pending.bubble.classList.contains("sb-typing")) {
            pending.bubble.textContent = frame.text || "Typing\u2026"; scroll();
          }
        } else if (frame.type === "message") {
          pending.done(frame.reply ? frame.reply.text : null, frame.sources, frame.reply);
        } else if (frame.type === "error") {
          pending.fail(frame.message);
        }
      };
    });
  }

  function typingBubble() {
    var node = el("div", { class: "sb-msg sb-typing", "aria-label": "Assistant is typing" }, "Typing\u2026");
    log.appendChild(node); scroll();
    return node;
  }

  // A proposed action's answers ("Yes" / "No") as buttons under the reply: pressing one sends its text.
  function showChoices(after, choices) {
    var row = el("div", { class: "sb-choices", "data-choices": "" });
    choices.forEach(function (choice) {
      var button = el("button", { type: "button", class: "sb-choice" }, choice);
      button.addEventListener("click", function () {
        if (busy) return;
        row.remove(); sendText(choice);
      });
      row.appendChild(button);
    });
    after.parentNode.insertBefore(row, after.nextSibling); scroll();
  }

  var lastFailed = null;
  function sendText(text) {
    setBusy(true); showError("");
    bubble("user", text);
    var typing = typingBubble();
    // Sending the same text again after a failure reuses its id: the gateway then resumes that turn
    // (or says it was answered) instead of storing the message twice.
    var clientId = (lastFailed && lastFailed.text === text) ? lastFailed.clientId
      : (window.crypto && crypto.randomUUID) ? crypto.randomUUID() : String(Date.now()) + Math.random();
    lastFailed = null;
    var finish = function (reply, sources, stored) {
      if (reply === null) {  // handed off to a person: their reply arrives by itself
        typing.remove(); pending = null; setBusy(false); input.focus(); return;
      }
      typing.className = "sb-msg sb-agent"; typing.setAttribute("data-role", "agent");
      typing.removeAttribute("aria-label");
      typing.textContent = reply; showSources(typing, sources);
      var shownSources = typing.nextElementSibling && typing.nextElementSibling.hasAttribute("data-sources");
      showRating(shownSources ? typing.nextElementSibling : typing, stored);
      if (stored && stored.choices && stored.choices.length) showChoices(typing, stored.choices);
      if (stored && stored.message_id) shown[stored.message_id] = true;
      pending = null; setBusy(false); scroll(); input.focus();
    };
    var fail = function (message) {
      lastFailed = { text: text, clientId: clientId };
      typing.remove(); pending = null; setBusy(false);
      showError(message || "Something went wrong. Please try again.");
      input.value = input.value || text;
    };
    return (session ? Promise.resolve() : newSession()).then(openSocket).then(function (ws) {
      if (ws) {
        pending = { bubble: typing, done: finish, fail: fail };
        ws.send(JSON.stringify({ text: text, client_message_id: clientId }));
        return;
      }
      return api("/api/chat/sessions/" + session.id + "/messages", {
        method: "POST", body: JSON.stringify({ text: text, client_message_id: clientId }),
      }).then(function (body) { finish(body.reply ? body.reply.text : null, body.sources, body.reply); });
    }).catch(function (err) { fail(err.message); });
  }

  var recorder = null;
  var MAX_RECORDING_MS = 60000;
  function sendRecording(blob) {
    setBusy(true); showError("");
    var heard = bubble("user", "\ud83c\udfa4 \u2026");
    var typing = typingBubble();
    return (session ? Promise.resolve() : newSession()).then(function () {
      return api("/api/chat/sessions/" + session.id + "/voice", {
        method: "POST", body: blob, headers: { "Content-Type": blob.type || "audio/webm" },
      });
    }).then(function (body) {
      heard.textContent = body.transcript || "\ud83c\udfa4";
      var reply = body.reply;
      typing.className = "sb-msg sb-agent"; typing.setAttribute("data-role", "agent");
      typing.removeAttribute("aria-label");
      typing.textContent = reply ? reply.text : "";
      if (reply) { showSources(typing, body.sources); if (reply.message_id) shown[reply.message_id] = true; }
      setBusy(false); scroll();
    }).catch(function (err) {
      heard.remove(); typing.remove(); setBusy(false);
      showError(err.message || "Your voice message could not be sent.");
    });
  }
  function startRecording() {
    navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
      var chunks = [];
      recorder = new MediaRecorder(stream);
      recorder.ondataavailable = function (ev) { if (ev.data && ev.data.size) chunks.push(ev.data); };
      recorder.onstop = function () {
        stream.getTracks().forEach(function (t) { t.stop(); });
        var type = recorder.mimeType; recorder = null;
        mic.setAttribute("aria-pressed", "false"); mic.setAttribute("aria-label", "Record a voice message");
        sendRecording(new Blob(chunks, { type: type || "audio/webm" }));
      };
      recorder.start();
      mic.setAttribute("aria-pressed", "true"); mic.setAttribute("aria-label", "Stop recording and send");
      setTimeout(function () { if (recorder && recorder.state === "recording") recorder.stop(); }, MAX_RECORDING_MS);
    }).catch(function () { showError("The microphone is not available."); });
  }
  mic.addEventListener("click", function () {
    if (recorder) { recorder.stop(); return; }
    if (!busy) startRecording();
  });

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = input.value;
    if (busy) return;
    if (!text.trim()) { showError("Please type a message first."); return; }
    input.value = "";
    sendText(text);
  });
  input.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); form.requestSubmit(); }
  });
  function toggle(open) {
    panel.hidden = !open;
    launcher.setAttribute("aria-expanded", String(open));
    if (open) { input.focus(); } else { launcher.focus(); }
  }
  launcher.addEventListener("click", function () { toggle(panel.hidden); });
  close.addEventListener("click", function () { toggle(false); });

  // The socket stays open so a person's replies (during a handoff) arrive without a reload.
  // Send waits (disabled) until the session is known: a message sent before it would have nowhere to go.
  setBusy(true);
  var ready = restore().then(function () { return openSocket(); })
    .catch(function (err) { showError("Chat is unavailable: " + err.message); })
    .then(function (ws) { setBusy(false); return ws; });
  window.Switchboard = { ready: ready, open: function () { toggle(true); } };

  function mount() { (opts.page ? document.getElementById("switchboard-chat") || document.body : document.body).appendChild(root); }
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);
})();
