// The runs explorer's habits: `/` focuses the search, times in the viewer's own zone, the
// column chooser's "Add", the selected rows' links to the panel, and parallel coordinates
// whose brushing hides the table's rows outside the chosen ranges. The table's state lives
// in the URL (the server renders it), so links share it and the back button restores it.
(function () {
  "use strict";

  document.addEventListener("keydown", function (event) {
    var q = document.getElementById("explorer-q");
    var typing = /^(INPUT|TEXTAREA|SELECT)$/.test((event.target || {}).tagName || "");
    if (q && event.key === "/" && !typing && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      q.focus();
      q.select();
    }
  });

  document.querySelectorAll("time[data-ms]").forEach(function (node) {
    var when = new Date(Number(node.dataset.ms));
    if (!isNaN(when)) {
      node.title = when.toISOString();
      node.textContent = when.toLocaleString(undefined, {
        year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
      });
    }
  });

  var add = document.getElementById("explorer-add");
  if (add) {
    add.addEventListener("click", function () {
      var kind = document.getElementById("explorer-add-kind").value;
      var name = document.getElementById("explorer-add-name").value.trim();
      var agg = document.getElementById("explorer-add-agg").value;
      if (!name) return;
      if (/[\s,`]/.test(name)) name = "`" + name.replace(/`/g, "") + "`";
      var spec = kind + "." + name + (kind === "metrics" && agg ? "@" + agg : "");
      var box = document.getElementById("explorer-cols");
      box.value = box.value.trim() ? box.value.trim() + "," + spec : spec;
    });
  }

  function picked() {
    return Array.prototype.map.call(
      document.querySelectorAll(".explorer-pick:checked"), function (b) { return b.value; });
  }

  function refreshLinks() {
    var ids = picked();
    var count = document.querySelector("[data-explorer-selected]");
    if (count) count.textContent = String(ids.length);
    document.querySelectorAll("[data-explorer-link]").forEach(function (link) {
      var base = link.dataset.explorerLink;
      var ok = "explorerSingle" in link.dataset ? ids.length === 1 : ids.length > 0;
      if (!ok) { link.removeAttribute("href"); link.classList.add("disabled"); return; }
      link.classList.remove("disabled");
      var href = "explorerSingle" in link.dataset ? base.replace("{id}", ids[0]) : base + ids.join(",");
      if ("explorerBy" in link.dataset) href += "&by=sharing";
      link.href = href;
    });
  }
  document.querySelectorAll(".explorer-pick").forEach(function (b) {
    b.addEventListener("change", refreshLinks);
  });
  var all = document.getElementById("explorer-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll(".explorer-pick").forEach(function (b) { b.checked = all.checked; });
      refreshLinks();
    });
  }
  refreshLinks();

  // --- parallel coordinates -------------------------------------------------------------
  var plot = document.getElementById("explorer-parcoords");
  var draw = document.getElementById("parcoords-draw");
  if (!plot || !draw) return;

  function loadPlotly(then) {
    if (window.Plotly) return then();
    var tag = document.createElement("script");
    tag.src = plot.dataset.plotly;
    tag.onload = then;
    document.head.appendChild(tag);
  }

  function rowIds() {
    var ids = picked();
    if (ids.length) return ids;
    return Array.prototype.map.call(
      document.querySelectorAll("#explorer-table tbody tr"), function (r) { return r.dataset.run; });
  }

  function dimension(label, values) {
    var numbers = values.every(function (v) { return v === null || typeof v === "number"; });
    if (numbers) {
      return { label: label, values: values.map(function (v) { return v === null ? NaN : v; }) };
    }
    var words = Array.from(new Set(values.map(String))).sort();
    return {
      label: label,
      values: values.map(function (v) { return words.indexOf(String(v)); }),
      tickvals: words.map(function (_, i) { return i; }),
      ticktext: words,
    };
  }

  function applyBrush(runs, dims) {
    var keep = {};
    runs.forEach(function (run, i) {
      keep[run] = dims.every(function (d) {
        if (!d.constraintrange) return true;
        var ranges = Array.isArray(d.constraintrange[0]) ? d.constraintrange : [d.constraintrange];
        var v = d.values[i];
        return ranges.some(function (r) { return v >= r[0] && v <= r[1]; });
      });
    });
    document.querySelectorAll("#explorer-table tbody tr").forEach(function (row) {
      row.hidden = keep[row.dataset.run] === false;
    });
  }

  draw.addEventListener("click", function () {
    var axes = document.getElementById("parcoords-axes").value.split(",").map(function (s) {
      return s.trim();
    }).filter(Boolean);
    var colour = document.getElementById("parcoords-colour").value;
    var ids = rowIds();
    var wanted = axes.concat([colour]).filter(function (c, i, all) { return all.indexOf(c) === i; });
    var params = new URLSearchParams({
      runs: ids.join(","),
      cols: wanted.join(","),
      sort: "attributes.created DESC",
    });
    fetch(plot.dataset.json + "?" + params.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (body) {
        if (body.error) { plot.textContent = body.error; return; }
        var column = function (spec) {
          var k = body.columns.indexOf(spec);
          return body.values.map(function (row) { return k < 0 ? null : row[k]; });
        };
        var dims = axes.map(function (axis) { return dimension(axis, column(axis)); });
        var outcome = dimension(colour, column(colour));
        if (axes.indexOf(colour) < 0) dims.push(outcome);
        loadPlotly(function () {
          var trace = {
            type: "parcoords",
            line: { color: outcome.values, colorscale: "Viridis", showscale: true },
            dimensions: dims,
          };
          window.Plotly.newPlot(plot, [trace], { margin: { l: 60, r: 60, t: 40, b: 20 } });
          plot.on("plotly_restyle", function () {
            applyBrush(body.runs.map(String), plot.data[0].dimensions);
          });
        });
      });
  });
})();
