"""Making and revoking API tokens from the account page.

A new token's raw value is put in the session and shown once by the account page, which pops
it; only the token's hash is stored.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from webapp.experiments.models import ApiToken

NEW_TOKEN_SESSION_KEY = "new_api_token"


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, required=False)

    def clean_name(self) -> str:
        return self.cleaned_data["name"].strip() or "unnamed"


def pop_new_token(request: HttpRequest) -> str | None:
    """The raw value of the token just made, once; None afterwards."""
    return request.session.pop(NEW_TOKEN_SESSION_KEY, None)


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A token name is at most 100 characters.")
        return redirect("account")
    _, raw = ApiToken.issue(request.user, form.cleaned_data["name"])
    request.session[NEW_TOKEN_SESSION_KEY] = raw
    return redirect("account")


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    deleted, _ = ApiToken.objects.filter(id=token_id, user=request.user).delete()
    if not deleted:
        raise Http404("There is no such token of yours.")
    messages.success(request, "Token revoked: requests that send it now get 401.")
    return redirect("account")
