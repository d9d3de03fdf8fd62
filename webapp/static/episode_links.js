// A click on one of the run page's sparklines opens the episodes of the step under the
// pointer (webapp/episodes/page_views.py, `near=1`: the nearest recorded step). The step is
// read back from the x position with the sparkline's own scale (webapp/runs/
// sparkline.py: PAD 3, the first and last step at the box's edges); an accuracy curve opens
// the evaluation's episodes, any other curve the training step's.
(function () {
  "use strict";
  var PAD = 3;
  document.querySelectorAll("[data-spark][data-episodes-url]").forEach(function (fig) {
    var svg = fig.querySelector("svg");
    if (!svg) return;
    svg.classList.add("spark-link");
    var hint = document.createElementNS("http://www.w3.org/2000/svg", "title");
    hint.textContent = "Click: the episodes of that step";
    svg.appendChild(hint);
    svg.addEventListener("click", function (event) {
      var s0 = parseFloat(fig.dataset.firstStep), s1 = parseFloat(fig.dataset.lastStep);
      if (isNaN(s0) || isNaN(s1)) return;  // no points yet
      var box = svg.getBoundingClientRect(), width = svg.viewBox.baseVal.width || box.width;
      var x = (event.clientX - box.left) / box.width * width;
      var frac = Math.min(Math.max((x - PAD) / (width - 2 * PAD), 0), 1);
      var step = Math.round(s1 === s0 ? s0 : s0 + frac * (s1 - s0));
      var kind = fig.dataset.spark.indexOf("eval/") === 0 ? "eval" : "train";
      window.location.href = fig.dataset.episodesUrl + "?kind=" + kind + "&step=" + step + "&near=1";
    });
  });
})();
