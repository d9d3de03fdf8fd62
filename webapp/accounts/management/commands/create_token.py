"""`manage.py create_token <username> [--name NAME]`: print a new API token for that user.

Only the token's hash is stored; the printed value is the only copy. Revoke tokens on the
account page.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.experiments.models import ApiToken


class Command(BaseCommand):
    help = "Print a new API token for a user (shown once; only its hash is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label shown on the account page")

    def handle(self, *args, username: str, name: str, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"There is no user {username!r}.") from None
        _, raw = ApiToken.issue(user, name or "manage.py create_token")
        self.stdout.write(raw)
