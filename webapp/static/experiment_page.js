// The experiment page follows its runs while any is queued or running: every few seconds it
// reads live.json and updates each run's status badge, progress bar and, for a running run, its
// key results (base, peak, final, the cliff verdict). When a run finishes the page reloads once.
(function () {
  "use strict";
  var root = document.getElementById("experiment-live");
  if (!root || root.dataset.active === "0") return;
  var url = root.dataset.liveUrl;
  var finished = ["succeeded", "failed", "cancelled"];

  function apply(run) {
    document.querySelectorAll('[data-run-id="' + run.id + '"]').forEach(function (el) {
      var badge = el.querySelector("[data-status]");
      if (badge) {
        badge.textContent = run.status;
        badge.className = "badge status-" + run.status;
      }
      var bar = el.querySelector("[data-bar]");
      if (bar) bar.style.width = run.percent + "%";
      var track = el.querySelector(".bar");  // its tooltip: the phase before the first step
      if (track) track.title = run.phase || run.step_words;
      var steps = el.querySelector("[data-steps]");
      if (steps) steps.textContent = run.step_count;
      if (run.results) results(el, run.results);
    });
  }

  function number(value) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(3);
  }

  // A running run's key results, in the words the server wrote them (live.json).
  function results(row, r) {
    var cell = function (name) { return row.querySelector('[data-result="' + name + '"]'); };
    if (cell("base")) cell("base").textContent = number(r.base);
    if (cell("final")) cell("final").textContent = number(r.final);
    var peak = cell("peak");
    if (peak) {
      peak.textContent = number(r.peak);
      if (r.peak_step !== null && r.peak_step !== undefined) {
        var at = document.createElement("span");
        at.className = "muted small";
        at.textContent = "@" + r.peak_step;
        peak.append(" ", at);
      }
    }
    var verdict = row.querySelector("[data-cliff-verdict]");
    if (verdict) {
      var label = document.createElement("span");
      label.className = r.cliff ? "badge status-failed" : "muted";
      label.textContent = r.cliff_label;
      verdict.replaceChildren(label);
      if (r.cliff_line) {
        var line = document.createElement("span");
        line.className = "muted small";
        line.textContent = r.cliff_line;
        verdict.append(" ", line);
      }
      verdict.title = r.evidence || "";
    }
  }

  var before = null;
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
      .then(function (data) {
        var counts = {};
        data.runs.forEach(function (run) {
          apply(run);
          counts[run.status] = (counts[run.status] || 0) + 1;
        });
        root.querySelectorAll("[data-count]").forEach(function (el) {
          el.textContent = counts[el.dataset.count] || 0;
        });
        var done = data.runs.filter(function (r) { return finished.indexOf(r.status) >= 0; }).length;
        if (before !== null && done !== before) { window.location.reload(); return; }
        before = done;
        if (done < data.runs.length) window.setTimeout(poll, 3000);
      })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, 2000);
})();
