"""Routes of the accounts app: the home page and one's account page."""

from django.urls import path

from webapp.accounts import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/", views.account, name="account"),
]
