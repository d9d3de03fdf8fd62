"""Routes of the accounts app: the login page, the home page, one's account page and its API
tokens. (The rest of accounts/ — logout, password change — is django.contrib.auth's, in
webapp/urls.py.)"""

from django.urls import path

from webapp.accounts import token_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/", views.account, name="account"),
    path("accounts/login/", views.LoginView.as_view(), name="login"),
    path("accounts/sign-out/", views.sign_out, name="sign_out"),
    path("accounts/tokens/", token_views.token_create, name="token_create"),
    path("accounts/tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token_revoke"),
]
