"""Routes of swap jobs: the run page's forms and the API (`webapp/attribution/views.py`)."""

from django.urls import path

from webapp.attribution import views

urlpatterns = [
    path("runs/<int:run_id>/attribute/", views.attribute_page, name="run_attribute"),
    path("runs/<int:run_id>/mix/", views.mix_page, name="run_mix"),
    path("api/v1/runs/<int:run_id>/attribution-plan", views.plan_api, name="api_swap_plan"),
    path("api/v1/runs/<int:run_id>/swap-jobs", views.jobs_api, name="api_swap_jobs"),
    path("api/v1/swap-jobs/<int:job_id>", views.job_api, name="api_swap_job"),
    path("api/v1/swap-jobs/<int:job_id>/cancel", views.cancel_job_api, name="api_swap_job_cancel"),
]
