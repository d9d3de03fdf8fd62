"""Top-level URL routes. Each app owns its own routes; this file only mounts them."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from webapp.tracking import bulk_history
from webapp.tracking import views as tracking_views

urlpatterns = [
    # MLflow clients: MLFLOW_TRACKING_URI=http://<troupe>/ (webapp/tracking). First: a client
    # sends thousands of requests a run (one an artifact), and each pattern tried before the
    # match costs every one of them (no other route starts with these prefixes).
    path("api/2.0/mlflow/", include("webapp.tracking.urls")),
    path("api/2.0/mlflow-artifacts/", include("webapp.tracking.artifact_urls")),
    # the MLflow UI's path of it (its charts)
    path("ajax-api/2.0/mlflow/metrics/get-history-bulk-interval", bulk_history.bulk_interval),
    path("", include("webapp.accounts.urls")),
    path("", include("webapp.runs.urls")),
    path("", include("webapp.stats.urls")),
    path("", include("webapp.branching.urls")),
    path("", include("webapp.episodes.urls")),
    # the live radar's page and API (webapp/alerts/urls.py), before the API's catch-all
    path("", include("webapp.alerts.urls")),
    # swap jobs' forms and API (webapp/attribution), before the API's catch-all
    path("", include("webapp.attribution.urls")),
    # the runs explorer, and tags and notes from the browser (webapp/explorer)
    path("", include("webapp.explorer.urls")),
    path("api/v1/", include("webapp.api.urls")),
    # MLflow's other API versions and the UI's (`/api/3.0/mlflow/server-info`, …): its JSON 404
    re_path(r"^(ajax-)?api/\d+\.\d+/", tracking_views.not_found),
    path("", include("webapp.tracking.page_urls")),  # artifact downloads from the run page
    # login/, logout/, password_change/ … from Django, with templates in webapp/templates.
    path("accounts/", include("django.contrib.auth.urls")),
    # where a browser looks for a page's icon when the page names none (a 404 on every page)
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
]

# JSON, not an HTML page, for any /api/ request that fails outside an API view's own handling.
handler400 = "webapp.jsonapi.http.bad_request"
handler500 = "webapp.jsonapi.http.server_error"
