"""Routes of the experiment and run pages, and of the account page's token actions."""

from django.urls import path

from webapp.experiments import alert_views, branch_views, stats_views, token_views, views

urlpatterns = [
    path("experiments/", views.experiment_list, name="experiment_list"),
    path("experiments/new/", views.experiment_new, name="experiment_new"),
    path("experiments/<int:experiment_id>/", views.experiment_detail, name="experiment_detail"),
    path(
        "experiments/<int:experiment_id>/live.json", views.experiment_live, name="experiment_live"
    ),
    path(
        "experiments/<int:experiment_id>/cancel/", views.experiment_cancel, name="experiment_cancel"
    ),
    path(
        "experiments/<int:experiment_id>/delete/", views.experiment_delete, name="experiment_delete"
    ),
    path(
        "experiments/<int:experiment_id>/stats/",
        stats_views.experiment_stats_page,
        name="experiment_stats",
    ),
    path(
        "experiments/<int:experiment_id>/stats/queue/",
        stats_views.experiment_stats_queue,
        name="experiment_stats_queue",
    ),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/live.json", views.run_live, name="run_live"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/resume/", views.run_resume, name="run_resume"),
    path("runs/<int:run_id>/branch/", branch_views.run_branch, name="run_branch"),
    path("alerts/", alert_views.alerts_page, name="alerts"),
    path("accounts/tokens/", token_views.token_create, name="token_create"),
    path("accounts/tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token_revoke"),
]
