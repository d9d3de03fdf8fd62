// MLflow's client prints "View run at <Troupe>/#/experiments/<e>/runs/<id>", an address of
// MLflow's own UI (webapp/tracking/link_views.py). The browser keeps that fragment through
// the sign-in redirect; here it becomes Troupe's page of the run or experiment: at once when
// signed in, after signing in otherwise.
(function () {
  var found = location.hash.match(/^#\/experiments\/([^/?#]+)(?:\/runs\/([^/?#]+))?/);
  if (!found) return;
  var target = found[2]
    ? "/mlflow/runs/" + encodeURIComponent(found[2]) + "/"
    : "/mlflow/experiments/" + encodeURIComponent(found[1]) + "/";
  var next = document.querySelector("#login-form input[name=next]");
  if (next) next.value = target;
  else location.replace(target);
})();
