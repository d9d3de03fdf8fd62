"""Routes of the JSON API (docs/design.md §7), mounted at /api/v1/. A trailing slash is optional,
and any other path under /api/v1/ answers a JSON 404 rather than an HTML page."""

from django.urls import path, re_path

from webapp.api import views
from webapp.branching import views as branch_views
from webapp.episodes import views as episode_views
from webapp.stats import views as stats_views


def route(pattern: str, view, name: str) -> list:
    return [path(pattern, view, name=name), path(pattern + "/", view)]


urlpatterns = [
    *route("experiments", views.experiments, "api_experiments"),
    *route("experiments/<int:experiment_id>", views.experiment, "api_experiment"),
    *route("experiments/<int:experiment_id>/stats", stats_views.stats_api, "api_experiment_stats"),
    *route("runs", views.runs, "api_runs"),
    *route("runs/<int:run_id>", views.run, "api_run"),
    *route("runs/<int:run_id>/metrics", views.metrics, "api_metrics"),
    *route("runs/<int:run_id>/episodes", episode_views.episodes, "api_episodes"),
    *route("runs/<int:run_id>/episodes.jsonl", episode_views.episodes_jsonl, "api_episodes_jsonl"),
    *route("metrics", views.runs_metrics, "api_runs_metrics"),
    *route("runs/<int:run_id>/cancel", views.cancel, "api_cancel"),
    *route("runs/<int:run_id>/resume", views.resume, "api_resume"),
    *route("runs/<int:run_id>/finish", views.finish, "api_finish"),
    *route("runs/<int:run_id>/branch", branch_views.branch_api, "api_branch"),
    re_path(r"^(?P<rest>.*)$", views.not_found),
]
