/* Live updates for the Conversations screens: an EventSource on /admin/conversations/events tells
 * which conversation changed; the part of the page that shows it is read again from the server
 * (the same HTML the page was made of). Without this script the pages work by reloading. */
(function () {
  "use strict";
  var target = document.querySelector("[data-live-rows], [data-live-transcript]");
  if (!target || !window.EventSource) return;
  var state = document.querySelector("[data-live-state]");
  var fragment = target.getAttribute("data-fragment");
  if (!fragment) {
    var url = new URL(location.href);
    url.searchParams.set("fragment", "rows");
    fragment = url.pathname + url.search;
  }
  var timer = null;
  var inflight = false;
  var again = false;

  function openDetails() {
    var open = [];
    target.querySelectorAll("[data-message]").forEach(function (li) {
      li.querySelectorAll("details").forEach(function (d, i) { if (d.open) open.push(li.getAttribute("data-message") + "/" + i); });
    });
    return open;
  }
  function reopen(open) {
    open.forEach(function (key) {
      var parts = key.split("/");
      var li = target.querySelector('[data-message="' + parts[0] + '"]');
      var d = li && li.querySelectorAll("details")[+parts[1]];
      if (d) d.open = true;
    });
  }
  function refresh() {
    if (inflight) { again = true; return; }
    inflight = true;
    var open = openDetails();
    fetch(fragment, { credentials: "same-origin", headers: { "Accept": "text/html" } }).then(function (resp) {
      if (resp.redirected || resp.status === 401 || resp.status === 303) { location.reload(); return null; }
      return resp.ok ? resp.text() : null;
    }).then(function (html) {
      if (html !== null && html !== undefined) { target.innerHTML = html; reopen(open); target.setAttribute("data-refreshed", String(Date.now())); }
    }).catch(function () {}).then(function () {
      inflight = false;
      if (again) { again = false; refresh(); }
    });
  }
  var source = new EventSource(target.getAttribute("data-events"));
  var opened = false;
  source.onopen = function () {
    if (state) state.textContent = "live";
    target.setAttribute("data-live", "on");
    if (opened) refresh();  // a reconnect: whatever happened in between is read again
    opened = true;
  };
  source.onerror = function () { if (state) state.textContent = "reconnecting…"; };
  source.onmessage = function () {
    if (timer) return;
    timer = setTimeout(function () { timer = null; refresh(); }, 100);
  };
})();
