/* "Upload files" with a progress bar per file: each selected file goes up on its own request (the same
 * endpoint as the plain form, answering JSON), so a big PDF shows how far it is and a refused file
 * says why while the others go on. Without this script the form posts all files at once. */
(function () {
  "use strict";
  var form = document.querySelector("form[data-upload]");
  var table = document.querySelector("[data-upload-progress]");
  if (!form || !table || !window.FormData || !window.XMLHttpRequest) return;
  var body = table.querySelector("tbody");

  function row(name) {
    var tr = document.createElement("tr");
    var cells = [document.createElement("td"), document.createElement("td"), document.createElement("td")];
    cells[0].textContent = name;
    var bar = document.createElement("progress");
    bar.className = "progress"; bar.max = 100; bar.value = 0;
    cells[1].appendChild(bar);
    cells[2].textContent = "waiting";
    cells.forEach(function (c) { tr.appendChild(c); });
    body.appendChild(tr);
    return { bar: bar, status: cells[1], detail: cells[2] };
  }
  function finish(r, status, detail) {
    r.status.textContent = status;
    r.status.className = (status === "failed" || status === "refused") ? "bad" : "ok";
    r.detail.textContent = detail;
  }
  function send(file, r) {
    return new Promise(function (resolve) {
      var data = new FormData();
      data.append("csrf_token", form.elements.csrf_token.value);
      data.append("kb", form.elements.kb.value);
      data.append("files", file, file.name);
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.onprogress = function (ev) {
        if (ev.lengthComputable) { r.bar.value = Math.round(100 * ev.loaded / ev.total); r.detail.textContent = "uploading"; }
      };
      xhr.upload.onload = function () { r.bar.value = 100; r.detail.textContent = "extracting and indexing"; };
      xhr.onload = function () {
        var answer = null;
        try { answer = JSON.parse(xhr.responseText); } catch (e) { answer = null; }
        if (answer && answer.rows && answer.rows.length) finish(r, answer.rows[0][1], answer.rows[0][2]);
        else finish(r, "failed", (answer && (answer.error || answer.message)) || ("HTTP " + xhr.status));
        resolve();
      };
      xhr.onerror = function () { finish(r, "failed", "the connection failed; nothing was stored"); resolve(); };
      xhr.send(data);
    });
  }
  // The documents list below, read again once the files are in (the rows above said "ready").
  function refreshDocuments() {
    var current = document.querySelector("[data-documents]");
    if (!current || !window.fetch || !window.DOMParser) return Promise.resolve();
    return fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (answer) { return answer.ok ? answer.text() : ""; })
      .then(function (html) {
        var fresh = html && new DOMParser().parseFromString(html, "text/html").querySelector("[data-documents]");
        if (fresh) current.replaceWith(document.importNode(fresh, true));
      })
      .catch(function () { /* the list stays as it was; a reload shows it */ });
  }
  form.addEventListener("submit", function (ev) {
    var files = Array.prototype.slice.call(form.elements.files.files || []);
    if (!files.length) return;  // the server says what is missing
    ev.preventDefault();
    body.innerHTML = "";
    table.hidden = false;
    var rows = files.map(function (f) { return row(f.name); });
    files.reduce(function (chain, file, i) { return chain.then(function () { return send(file, rows[i]); }); },
      Promise.resolve()).then(refreshDocuments)
      .then(function () { form.reset(); table.setAttribute("data-done", "true"); });
  });
})();
