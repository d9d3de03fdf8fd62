// The runs explorer's habits: `/` focuses the search, times in the viewer's own zone, the
// column chooser's "Add", the selected rows' links to the panel, and parallel coordinates
// whose brushing filters the table (every page of it) to the chosen ranges. The table's
// state, the brush included, lives in the URL (the server renders it), so links share it and
// the back button restores it.
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

  // Brushing filters the whole result, not the rows on screen: the brushed ranges become
  // clauses of the filter language in the URL's `brush`, which the server applies with the
  // search, so paging, the count and the CSV follow it and back/links restore it.
  function brushText(dims) {
    var clauses = [];
    dims.forEach(function (d) {
      if (!d.constraintrange || !d.constraintrange.length) return;
      if (d.label.indexOf("@") >= 0) {  // a filter reads a metric's last value only
        note.textContent = "A brush on " + d.label + " is not applied: filters read a metric's last value.";
        return;
      }
      var ranges = Array.isArray(d.constraintrange[0]) ? d.constraintrange : [d.constraintrange];
      if (d.ticktext) {
        var kept = d.ticktext.filter(function (_, i) {
          return ranges.some(function (r) { return i >= r[0] && i <= r[1]; });
        });
        var quoted = kept.map(function (w) { return w.indexOf("'") < 0 ? "'" + w + "'" : '"' + w + '"'; });
        clauses.push(d.label + " IN (" + (quoted.length ? quoted.join(", ") : "''") + ")");
        return;
      }
      // several ranges on one axis keep their envelope: the language has no `or`
      var lo = Math.min.apply(null, ranges.map(function (r) { return r[0]; }));
      var hi = Math.max.apply(null, ranges.map(function (r) { return r[1]; }));
      clauses.push(d.label + " >= " + String(lo) + " and " + d.label + " <= " + String(hi));
    });
    return clauses.join(" and ");
  }

  // The ranges of a brush this script wrote, per axis, to draw them again after the reload.
  function readBrush(text) {
    var out = {};
    (text || "").split(/ and (?=[a-z]+\.)/).forEach(function (clause) {
      var range = /^(\S+) (>=|<=) (\S+)$/.exec(clause);
      if (range) {
        var r = out[range[1]] || (out[range[1]] = { range: [-Infinity, Infinity] });
        r.range[range[2] === ">=" ? 0 : 1] = Number(range[3]);
        return;
      }
      var words = /^(\S+) IN \((.*)\)$/.exec(clause);
      if (words) {
        var list = [];
        words[2].replace(/'([^']*)'|"([^"]*)"/g, function (_, a, b) { list.push(a !== undefined ? a : b); });
        out[words[1]] = { words: list };
      }
    });
    return out;
  }

  function restoreBrush(dims, brushed) {
    dims.forEach(function (d) {
      var b = brushed[d.label];
      if (!b) return;
      if (b.range) { d.constraintrange = b.range; return; }
      if (!d.ticktext) return;
      var ranges = [];
      d.ticktext.forEach(function (w, i) { if (b.words.indexOf(w) >= 0) ranges.push([i - 0.25, i + 0.25]); });
      if (ranges.length) d.constraintrange = ranges;
    });
  }

  var note = document.getElementById("parcoords-note");
  var brushNode = document.querySelector("[data-brush]");
  var currentBrush = brushNode ? brushNode.dataset.brush : "";

  function goBrush(text) {
    if (text === currentBrush) return;
    var params = new URLSearchParams(window.location.search);
    if (text) params.set("brush", text); else params.delete("brush");
    params.delete("page");
    params.set("axes", document.getElementById("parcoords-axes").value);
    params.set("colour", document.getElementById("parcoords-colour").value);
    window.location.assign("?" + params.toString());
  }

  draw.addEventListener("click", function () {
    var axes = document.getElementById("parcoords-axes").value.split(",").map(function (s) {
      return s.trim();
    }).filter(Boolean);
    // an axis the brush holds stays drawn, so brushing another keeps its range
    Object.keys(readBrush(currentBrush)).forEach(function (label) {
      if (axes.indexOf(label) < 0) axes.push(label);
    });
    var colour = document.getElementById("parcoords-colour").value;
    var ids = picked();
    var wanted = axes.concat([colour]).filter(function (c, i, all) { return all.indexOf(c) === i; });
    // the search's matches (or the ticked runs) without the brush: the lines it hides stay
    // drawn, greyed, so the brush can be widened again
    var params = new URLSearchParams({
      q: plot.dataset.q,
      cols: wanted.join(","),
      sort: "attributes.created DESC",
    });
    if (ids.length) params.set("runs", ids.join(","));
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
        restoreBrush(dims, readBrush(currentBrush));
        loadPlotly(function () {
          var trace = {
            type: "parcoords",
            line: { color: outcome.values, colorscale: "Viridis", showscale: true },
            dimensions: dims,
          };
          window.Plotly.newPlot(plot, [trace], { margin: { l: 60, r: 60, t: 40, b: 20 } });
          plot.on("plotly_restyle", function () {
            goBrush(brushText(plot.data[0].dimensions));
          });
        });
      });
  });

  // a page reached by brushing (or a link to one) draws the plot again with its ranges
  var given = new URLSearchParams(window.location.search);
  if (given.get("axes")) document.getElementById("parcoords-axes").value = given.get("axes");
  if (given.get("colour")) document.getElementById("parcoords-colour").value = given.get("colour");
  if (currentBrush) {
    document.getElementById("explorer-parcoords-box").open = true;
    draw.click();
  }
})();
