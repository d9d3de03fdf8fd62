"""`python manage.py load_demo_experiment [--runs N] [--user NAME]`: a finished demo experiment
with synthetic metric series (webapp/demo/build.py), to explore the panel without
training anything."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.dashboards.state import matrix_url
from webapp.demo.build import build_demo_experiment


class Command(BaseCommand):
    help = "Create a finished demo experiment with synthetic metrics, to explore the panel."

    def add_arguments(self, parser):
        parser.add_argument(
            "--runs",
            type=int,
            default=None,
            help="number of runs (default: the full demo matrix, 72 runs; at most 1000)",
        )
        parser.add_argument("--steps", type=int, default=200, help="training steps per run")
        parser.add_argument(
            "--user", default="troupe", help="owner of the experiment (default: troupe)"
        )

    def handle(self, *args, runs, steps, user, **options):
        if runs is not None and not 1 <= runs <= 1000:
            raise CommandError("--runs must be between 1 and 1000.")
        try:
            owner = get_user_model().objects.get(username=user)
        except get_user_model().DoesNotExist:
            raise CommandError(
                f"There is no user {user!r}: create it with `python manage.py ensure_login` "
                "or pass --user."
            ) from None
        try:
            demo = build_demo_experiment(owner, runs=runs, steps=steps)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        experiment = demo.experiment
        self.stdout.write(
            f"Created experiment {experiment.id} ({experiment.name}) with "
            f"{experiment.runs.count()} runs. Its matrix: {matrix_url(experiment.id)}"
        )
