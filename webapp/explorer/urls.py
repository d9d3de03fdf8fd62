"""Routes of the runs explorer, and of tags and notes on runs and experiments."""

from django.urls import path

from webapp.explorer import notes, views

urlpatterns = [
    path("explore/", views.runs_page, name="explorer"),
    path("explore/runs.csv", views.runs_csv, name="explorer_csv"),
    path("explore/runs.json", views.runs_json, name="explorer_json"),
    path("explore/columns/", views.choose_columns, name="explorer_columns"),
    path("explore/views/", views.save_view, name="explorer_save_view"),
    path("explore/views/<int:view_id>/delete/", views.delete_view, name="explorer_delete_view"),
    path("explore/experiments/", notes.experiment_search, name="explorer_experiments"),
    path("runs/<int:run_id>/notes/", notes.run_notes, name="run_notes"),
    path("experiments/<int:experiment_id>/notes/", notes.experiment_notes, name="experiment_notes"),
    path("explore/chart/", views.chart_page, name="explorer_chart"),
    path("explore/chart/save/", views.save_chart, name="explorer_save_chart"),
    path("explore/charts/<int:chart_id>/delete/", views.delete_chart, name="explorer_delete_chart"),
    path("explore/plotly.min.js", views.plotly_js, name="explorer_plotly"),
]
