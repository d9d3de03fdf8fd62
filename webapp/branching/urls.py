"""Routes of the branch page (the branch API is the API's: `webapp/api/urls.py`)."""

from django.urls import path

from webapp.branching import views

urlpatterns = [
    path("runs/<int:run_id>/branch/", views.run_branch, name="run_branch"),
]
