"""Routes of the episode pages (`webapp/episodes/page_views.py`)."""

from django.urls import path

from webapp.episodes import page_views

urlpatterns = [
    path("runs/<int:run_id>/episodes/", page_views.step_page, name="run_episodes"),
    path("runs/<int:run_id>/episodes/time/", page_views.time_page, name="run_episodes_time"),
    path("episodes/compare/", page_views.runs_page, name="episodes_compare"),
]
