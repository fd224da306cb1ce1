// fusemap report: sortable tables, log-scale toggle, LoopTree expand/collapse, Pareto
// selection. Plain DOM code, no library; the page works (less interactively) without it.
(function () {
  "use strict";

  function cellValue(td) {
    var v = td.getAttribute("data-v");
    if (v !== null && v !== "" && !isNaN(Number(v))) { return Number(v); }
    return td.textContent.trim().toLowerCase();
  }

  function sortBy(th) {
    var table = th.closest("table");
    var body = table.tBodies[0];
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var descending = !th.classList.contains("desc");
    Array.prototype.forEach.call(th.parentNode.children, function (h) {
      h.classList.remove("asc", "desc");
    });
    th.classList.add(descending ? "desc" : "asc");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a.cells[index]), y = cellValue(b.cells[index]);
      if (x === y) { return 0; }
      var less = (typeof x === typeof y) ? x < y : typeof x === "number";
      return (less ? -1 : 1) * (descending ? -1 : 1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
  });

  var log = document.getElementById("log");
  if (log) {
    log.addEventListener("change", function () {
      document.body.classList.toggle("log", log.checked);
    });
  }

  function setTree(open) {
    document.querySelectorAll(".tree details").forEach(function (d) { d.open = open; });
  }
  document.querySelectorAll("[data-tree]").forEach(function (b) {
    b.addEventListener("click", function () { setTree(b.getAttribute("data-tree") === "open"); });
  });

  function selectPoint() {
    var id = decodeURIComponent(location.hash.slice(1));
    document.querySelectorAll(".point, .point-detail").forEach(function (el) {
      el.classList.remove("selected");
    });
    if (!/^point-\d+$/.test(id)) { return; }
    var detail = document.getElementById(id);
    if (detail) { detail.classList.add("selected"); }
    var n = id.split("-")[1];
    document.querySelectorAll('.point[data-point="' + n + '"]').forEach(function (p) {
      p.classList.add("selected");
    });
  }
  window.addEventListener("hashchange", selectPoint);
  selectPoint();

  document.body.setAttribute("data-ready", "1");
})();
