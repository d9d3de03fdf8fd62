"""Routes of the live radar's alerts: the page, and the API's, which the top-level URLs mount
before the API's catch-all."""

from django.urls import path

from webapp.alerts import views

urlpatterns = [
    path("alerts/", views.alerts_page, name="alerts"),
    path("api/v1/alerts", views.alerts_api, name="api_alerts"),
    path("api/v1/alerts/", views.alerts_api),
]
