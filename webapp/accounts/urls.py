"""Routes of the accounts app: the login page, the home page and one's account page. (The
rest of accounts/ — logout, password change — is django.contrib.auth's, in webapp/urls.py.)"""

from django.urls import path

from webapp.accounts import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/", views.account, name="account"),
    path("accounts/login/", views.LoginView.as_view(), name="login"),
    path("accounts/sign-out/", views.sign_out, name="sign_out"),
]
