// The run page follows its run while it is queued or running: every few seconds it reads
// live.json and updates the status, the progress bar, what the worker does before the first
// step (its phase: "Preparing model tiny-s: warm start 40%"), the latest value of every
// metric, the sparklines (from the coordinates the server computed, with their gaps marked)
// and the log tail; and every other block that changes while a run trains — key results,
// heartbeat, attempts, checkpoint, radar, branches and the checkpoints offered — arrives
// rendered by the page's own templates (`blocks`) and replaces its element. The branch form
// is left alone while someone is filling it in. When the run finishes the page reloads once,
// for its actions.
(function () {
  "use strict";
  var root = document.getElementById("run-live");
  var tail = document.querySelector("[data-log]");
  if (tail) tail.scrollTop = tail.scrollHeight;  // the newest lines first in view
  if (!root || ["queued", "running"].indexOf(root.dataset.status) < 0) return;
  var url = root.dataset.liveUrl;
  var SVG = "http://www.w3.org/2000/svg";

  function fmt(value, digits) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
  }

  // The server computed every coordinate (webapp/runs/sparkline.py): one polyline per
  // unbroken stretch, and a red × with its hover title where a NaN or inf broke the line.
  function drawSpark(fig, spark) {
    var lines = fig.querySelector("[data-spark-lines]");
    var gaps = fig.querySelector("[data-spark-gaps]");
    lines.replaceChildren();
    gaps.replaceChildren();
    spark.segments.forEach(function (points) {
      var line = document.createElementNS(SVG, "polyline");
      line.setAttribute("fill", "none");
      line.setAttribute("points", points);
      lines.appendChild(line);
    });
    spark.gaps.forEach(function (gap) {
      var mark = document.createElementNS(SVG, "path");
      mark.setAttribute("class", "spark-gap");
      mark.setAttribute("data-gap-step", gap.step);
      mark.setAttribute("d", gap.d);
      var title = document.createElementNS(SVG, "title");
      title.textContent = gap.title;
      mark.appendChild(title);
      gaps.appendChild(mark);
    });
  }

  function text(el, value) { if (el) el.textContent = value; }

  // A block being edited (focus inside, or typed into since the last swap) keeps its DOM.
  var edited = {}, shown = {};
  document.querySelectorAll("[data-block]").forEach(function (el) {
    el.addEventListener("input", function () { edited[el.dataset.block] = true; });
  });

  function renderBlocks(blocks) {
    Object.keys(blocks || {}).forEach(function (name) {
      var el = document.querySelector('[data-block="' + name + '"]');
      if (!el || shown[name] === blocks[name]) return;
      if (edited[name] || el.contains(document.activeElement)) return;
      el.innerHTML = blocks[name];  // rendered by the server's templates, escaped there
      shown[name] = blocks[name];
    });
  }

  function render(data) {
    var run = data.run;
    var badge = root.querySelector("[data-status]");
    badge.textContent = run.status;
    badge.className = "badge status-" + run.status;
    root.querySelector("[data-bar]").style.width = Math.round(run.progress * 100) + "%";
    text(root.querySelector("[data-steps]"), run.step_words);
    var phase = root.querySelector("[data-phase]");  // e.g. a tiny model's warm start, in %
    if (phase) {
      phase.textContent = run.phase || "";
      phase.hidden = !run.phase;
    }
    text(root.querySelector("[data-worker]"), run.worker || "—");

    data.sparklines.forEach(function (spark) {
      var fig = document.querySelector('[data-spark="' + spark.key + '"]');
      if (!fig) return;
      drawSpark(fig, spark);
      fig.dataset.firstStep = spark.first_step === null ? "" : spark.first_step;  // for clicks
      fig.dataset.lastStep = spark.last_step === null ? "" : spark.last_step;
      text(fig.querySelector("[data-spark-last]"), spark.last_gap ? "NaN/inf" : fmt(spark.last, 3));
      text(fig.querySelector("[data-spark-range]"),
        spark.low === null ? "no points yet" : fmt(spark.low, 3) + " – " + fmt(spark.high, 3));
    });

    var list = document.querySelector("[data-latest]");
    var keys = Object.keys(data.latest);
    if (list && keys.length) {
      list.replaceChildren();
      keys.forEach(function (key) {
        var row = document.createElement("div");
        row.className = "metric";
        var code = document.createElement("code");
        code.textContent = key;
        var step = document.createElement("span");
        step.className = "muted small";
        step.textContent = "@" + data.latest[key].step;
        var value = document.createElement("span");
        value.className = "num";
        var v = data.latest[key].value;
        // A stored gap is a NaN or inf the run logged (or an explicit null): say so.
        value.textContent = v === null ? "NaN/inf" : Number.isInteger(v) ? String(v) : fmt(v, 4);
        row.append(code, step, value);
        list.appendChild(row);
      });
      var empty = document.querySelector("[data-latest-empty]");
      if (empty) empty.hidden = true;
    }

    renderBlocks(data.blocks);

    var log = document.querySelector("[data-log]");
    if (log && data.logs.length) {
      log.textContent = data.logs.map(function (entry) {
        return entry.time.slice(11, 19) + " " + entry.line;
      }).join("\n");
      log.scrollTop = log.scrollHeight;
    }
    return run.status;
  }

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
      .then(function (data) {
        var status = render(data);
        if (["queued", "running"].indexOf(status) < 0) { window.location.reload(); return; }
        window.setTimeout(poll, 3000);
      })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, 3000);
})();
