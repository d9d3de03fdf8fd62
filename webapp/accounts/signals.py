"""API tokens end with the password: a user whose password changes or is disabled loses
every API token, wherever the change is made (the password form, the admin, `manage.py
changepassword`, a script calling `set_password`).

A token acts as its user, and a password change is what someone does when they fear their
account is known to others; a token made before it would otherwise keep working for whoever
holds it. Django's own re-hash of an unchanged password on login (a hasher upgrade) is not a
change: `check_password` clears `_password` before that save.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_save

from webapp.experiments.models import ApiToken


def _password_changing(sender, instance, update_fields=None, **kwargs) -> None:
    if instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    # set_password() keeps the new raw password in `_password` until the save.
    changed = getattr(instance, "_password", None) is not None
    if not changed and not instance.has_usable_password():
        # set_unusable_password() leaves no such trace: compare with the stored hash.
        stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
        changed = stored is not None and stored != instance.password
    instance._revoke_api_tokens = changed


def _password_changed(sender, instance, created=False, **kwargs) -> None:
    if getattr(instance, "_revoke_api_tokens", False):
        instance._revoke_api_tokens = False
        ApiToken.objects.filter(user=instance).delete()


def connect() -> None:
    user_model = get_user_model()
    pre_save.connect(_password_changing, sender=user_model, dispatch_uid="troupe-token-revoke-pre")
    post_save.connect(_password_changed, sender=user_model, dispatch_uid="troupe-token-revoke")
