// The experiment page's radar column follows the runs while any is queued or running: every
// few seconds it reads the experiment's alerts (GET /api/v1/alerts?experiment=<id>) and
// shows each run's worst event, ranked as the server ranks it
// (webapp/alerts/templatetags/radar.py): confirmed before provisional, then by kind in the
// order the page hands over (data-radar-severity), then the earliest step.
(function () {
  "use strict";
  var root = document.getElementById("experiment-live");
  var table = document.querySelector("[data-radar-experiment]");
  if (!root || !table || root.dataset.active === "0") return;
  var experiment = table.dataset.radarExperiment;
  // The kinds worst first, as the server ranks them (vocabulary/names.py ALERT_KINDS).
  var SEVERITY = (table.dataset.radarSeverity || "").split(",");
  // Each kind in the words of the page's other cells ("non-finite loss"), from the server.
  var NAMES = {};
  (table.dataset.radarNames || "").split(",").forEach(function (pair) {
    var at = pair.indexOf("=");
    if (at > 0) NAMES[pair.slice(0, at)] = pair.slice(at + 1);
  });

  function rank(a) {
    var kind = SEVERITY.indexOf(a.kind);
    return [a.provisional ? 1 : 0, kind < 0 ? SEVERITY.length : kind, a.step];
  }

  function worse(a, b) {
    var ra = rank(a), rb = rank(b);
    for (var i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return ra[i] < rb[i];
    return false;
  }

  function render(alerts) {
    var byRun = {};
    alerts.forEach(function (a) { (byRun[a.run] = byRun[a.run] || []).push(a); });
    Object.keys(byRun).forEach(function (run) {
      var cell = table.querySelector('tr[data-run-id="' + run + '"] [data-radar]');
      if (!cell) return;
      var list = byRun[run];
      var worst = list.reduce(function (w, a) { return worse(a, w) ? a : w; });
      var link = document.createElement("a");
      link.href = "/alerts/?run=" + run;
      link.title = list.length + " alert" + (list.length === 1 ? "" : "s") + ", " +
        list.filter(function (a) { return !a.provisional; }).length + " confirmed";
      var badge = document.createElement("span");
      badge.className = "badge " + (worst.provisional ? "status-queued" : "status-failed");
      badge.textContent = (NAMES[worst.kind] || worst.kind) + (worst.role ? " " + worst.role : "") + " @" + worst.step;
      var count = document.createElement("span");
      count.className = "muted small";
      count.textContent = String(list.length);
      link.append(badge, " ", count);
      cell.replaceChildren(link);
    });
  }

  function poll() {
    fetch("/api/v1/alerts?experiment=" + experiment + "&state=current&limit=1000",
      { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) { render(data.alerts); window.setTimeout(poll, 5000); })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, 5000);
})();
