"""`manage.py ensure_login`: make sure the owner's login exists and say how to sign in.

On first use it creates the user (an administrator) with a generated password and keeps the
password in $TROUPE_DATA_DIR/login.txt; afterwards it reads that file back, so `make run`
prints the same credentials every time.
"""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


def read_login(path: Path) -> dict[str, str]:
    """The `key: value` lines of a login file ({} when there is none)."""
    if not path.exists():
        return {}
    pairs = (line.split(":", 1) for line in path.read_text().splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


class Command(BaseCommand):
    help = "Create the owner's login if it is missing and print its username and password."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="troupe")

    def handle(self, *args, username: str, **options) -> None:
        path = settings.DATA_DIR / "login.txt"
        stored = read_login(path)
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if stored.get("username") == username:
            password = stored["password"]
        else:
            password = secrets.token_urlsafe(12)
            path.write_text(f"username: {username}\npassword: {password}\n")
            path.chmod(0o600)
        # An existing user keeps the password they may have changed since; the file then says
        # what it was first set to.
        if created or stored.get("username") != username:
            user.set_password(password)
            user.save(update_fields=["password"])
        self.stdout.write(f"username: {username}\npassword: {password}")
