// The run page's Radar panel follows a queued or running run: every few seconds it reads the
// run's alerts (GET /api/v1/alerts?run=<id>) and its best checkpoint (the trainer's
// ckpt/best_step and ckpt/best_accuracy points) and redraws the table, so an event shows up
// with its step while the run trains. Text goes in as text: roles are names users chose.
(function () {
  "use strict";
  var panel = document.getElementById("radar");
  if (!panel || !panel.dataset.active) return;
  var run = panel.dataset.runId;
  var table = panel.querySelector("[data-radar]");
  var empty = panel.querySelector("[data-radar-empty]");
  var best = panel.querySelector("[data-best]");
  var legend = panel.querySelector("[data-radar-legend]");

  function cell(text, className) {
    var td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text;
    return td;
  }

  function num(value) {
    return value === null || value === undefined ? "—" : String(Number(value.toFixed(4)));
  }

  function render(alerts) {
    alerts.sort(function (a, b) { return a.step - b.step || (a.kind < b.kind ? -1 : 1); });
    var body = table.querySelector("tbody");
    body.replaceChildren();
    alerts.forEach(function (alert) {
      var row = document.createElement("tr");
      row.dataset.alertKind = alert.kind;
      var kind = cell("");
      var strong = document.createElement("strong");
      strong.textContent = alert.kind;
      kind.appendChild(strong);
      var state = cell("");
      var badge = document.createElement("span");
      badge.className = "badge " + (alert.provisional ? "status-queued" : "status-failed");
      badge.textContent = alert.provisional ? "provisional" : "confirmed @" + alert.seen_at;
      state.appendChild(badge);
      row.append(kind, cell(alert.role || "—"), cell(String(alert.step), "num"), state,
        cell(num(alert.value), "num"), cell(num(alert.limit), "num"));
      body.appendChild(row);
    });
    table.hidden = !alerts.length;
    empty.hidden = !!alerts.length;
    if (legend) legend.hidden = !alerts.length;
  }

  function renderBest(series) {
    var steps = series["ckpt/best_step"], acc = series["ckpt/best_accuracy"];
    if (!steps || !steps.values.length) return;
    var step = steps.values[steps.values.length - 1];
    var value = acc && acc.values.length ? acc.values[acc.values.length - 1] : null;
    best.replaceChildren("Best checkpoint: step ");
    var s = document.createElement("strong");
    s.textContent = String(step);
    var a = document.createElement("strong");
    a.textContent = value === null ? "—" : value.toFixed(3);
    best.append(s, ", accuracy ", a);
  }

  function get(url) {
    return fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); });
  }

  function poll() {
    Promise.all([
      get("/api/v1/alerts?run=" + run + "&limit=1000"),
      get("/api/v1/runs/" + run + "/metrics?keys=ckpt/best_step,ckpt/best_accuracy&max_points=0"),
    ]).then(function (answers) {
      render(answers[0].alerts);
      renderBest(answers[1].series);
      window.setTimeout(poll, 4000);
    }).catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, 4000);
})();
