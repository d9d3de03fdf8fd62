"""`manage.py sweep_runs`: one stale-run sweep by hand, over every kind of leased job — runs,
swap jobs (workers run it every TROUPE_SWEEP_SECONDS by themselves; see workers/sweep.py)."""

from django.core.management.base import BaseCommand

from webapp.leases import requeue_stale_all


class Command(BaseCommand):
    help = (
        "Queue again the running runs and swap jobs whose worker stopped beating "
        "(TROUPE_STALE_RUN_SECONDS)."
    )

    def handle(self, *args, **options) -> None:
        requeued = requeue_stale_all()
        self.stdout.write(f"Queued again: {', '.join(map(str, requeued['run'])) or 'none'}")
        for kind, ids in requeued.items():
            if kind != "run" and ids:
                self.stdout.write(f"Queued again ({kind}s): {', '.join(map(str, ids))}")
