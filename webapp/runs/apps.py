"""The runs app: the experiment and run pages, queueing runs, who may see and change them, a
run's files, lineage and key results. An app (no models of its own) for its template tags and
the `sweep_runs` command."""

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"

    def ready(self) -> None:
        # Registers runs as a kind of leased job (webapp/leases.py): swept, handed back.
        from webapp.runs import queueing  # noqa: F401
