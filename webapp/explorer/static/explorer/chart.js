// Draws the explorer's charts: each `.explorer-chart` takes its figure from the JSON script
// named by `data-figure` (or `chart-figure`), with plotly.js served by the explorer.
(function () {
  "use strict";
  var boxes = document.querySelectorAll(".explorer-chart");
  if (!boxes.length) return;
  function draw() {
    boxes.forEach(function (box) {
      var source = document.getElementById(box.dataset.figure || "chart-figure");
      if (!source) return;
      var fig = JSON.parse(JSON.parse(source.textContent));
      window.Plotly.newPlot(box, fig.data, fig.layout, { responsive: true });
    });
  }
  if (window.Plotly) return draw();
  var tag = document.createElement("script");
  tag.src = boxes[0].dataset.plotly;
  tag.onload = draw;
  document.head.appendChild(tag);
})();
