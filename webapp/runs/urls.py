"""Routes of the experiment and run pages."""

from django.urls import path

from webapp.runs import views

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
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/live.json", views.run_live, name="run_live"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/resume/", views.run_resume, name="run_resume"),
]
