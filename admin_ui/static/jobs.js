/* Ingestion jobs: while one is queued or running, re-read the list every second. */
(function () {
  "use strict";
  var rows = document.querySelector("[data-job-rows]");
  if (!rows) return;
  function active() { return rows.querySelector('[data-status="queued"], [data-status="running"]') !== null; }
  function poll() {
    if (!active()) return;
    fetch(rows.getAttribute("data-fragment"), { credentials: "same-origin" }).then(function (resp) {
      return resp.ok ? resp.text() : null;
    }).then(function (html) {
      if (html !== null) rows.innerHTML = html;
    }).catch(function () {}).then(function () { setTimeout(poll, 1000); });
  }
  setTimeout(poll, 1000);
})();
