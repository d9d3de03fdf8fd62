"""Routes of the statistics page (its JSON is the API's: `webapp/api/urls.py`)."""

from django.urls import path

from webapp.stats import views

urlpatterns = [
    path(
        "experiments/<int:experiment_id>/stats/",
        views.experiment_stats_page,
        name="experiment_stats",
    ),
    path(
        "experiments/<int:experiment_id>/stats/queue/",
        views.experiment_stats_queue,
        name="experiment_stats_queue",
    ),
]
