"""`manage.py sweep_runs`: one stale-run sweep by hand (workers run it every
TROUPE_SWEEP_SECONDS by themselves; see workers/sweep.py)."""

from django.core.management.base import BaseCommand

from webapp.runs.queueing import requeue_stale_runs


class Command(BaseCommand):
    help = "Queue again the running runs whose worker stopped beating (TROUPE_STALE_RUN_SECONDS)."

    def handle(self, *args, **options) -> None:
        requeued = requeue_stale_runs()
        self.stdout.write(f"Queued again: {', '.join(map(str, requeued)) or 'none'}")
