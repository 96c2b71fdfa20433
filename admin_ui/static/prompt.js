/* Line numbers beside the template editor: the gutter follows what is typed and how far it scrolls. */
(function () {
  "use strict";
  var area = document.querySelector("[data-numbered]");
  var gutter = document.querySelector("[data-gutter]");
  if (!area || !gutter) return;
  function number() {
    var lines = area.value.split("\n").length;
    if (gutter.childElementCount === lines) return;
    var out = [];
    for (var i = 1; i <= lines; i++) out.push("<span>" + i + "</span>");
    gutter.innerHTML = out.join("\n") + "\n";
  }
  area.addEventListener("input", number);
  area.addEventListener("scroll", function () { gutter.scrollTop = area.scrollTop; });
  number();
})();
