"""`manage.py purge_deleted [--older-than DAYS]`: remove for good the runs and experiments an
MLflow client deleted (MLflow's `mlflow gc`). Until then a deleted run or experiment keeps its
points and files and `restore_run` / `restore_experiment` bring it back."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from webapp.tracking.store import purge_deleted

DAY_MS = 24 * 3600 * 1000


class Command(BaseCommand):
    help = "Remove for good the runs and experiments deleted through MLflow (mlflow gc)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=0,
            metavar="DAYS",
            help="only what was deleted at least this many days ago (default: all of it)",
        )

    def handle(self, *args, older_than: float, **options) -> None:
        experiments, runs = purge_deleted(int(older_than * DAY_MS))
        self.stdout.write(f"Removed {experiments} deleted experiment(s) and {runs} run(s).")
