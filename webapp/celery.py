"""The Celery application of the Django project: `celery -A webapp worker -Q cpu`.

It belongs to the project (Django's standard layout), not to `workers`: the web process sends
runs through it (`webapp/runs/queueing.py`) without importing any worker code. The
worker loads its tasks by name (`include`), and importing `workers.tasks` connects what runs at
worker start (the stale-run sweep, the sandbox report).

Where the broker and result backend are comes from Django settings (the CELERY_ names in
webapp/settings.py, which read the environment). How tasks run is fixed here, because training
runs are long, heavy and must never run twice at once.
"""

import os

from celery import Celery
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

# The live radar's task is the web app's own (`webapp/alerts/radar.py`): the web process
# queues it without importing any worker code.
app = Celery("troupe", include=["workers.tasks", "webapp.alerts.radar"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    # Queues by device: GPU workers take `gpu`, everything else `cpu`; `radar` holds the live
    # radar's evaluations, a worker of its own (a run's worker trains one run at a time, for
    # hours). Each queue has its own exchange and routing key; left to Celery's defaults, all
    # would bind to the default exchange with the same key and every task would go to each.
    task_queues=[Queue(name, Exchange(name), routing_key=name) for name in ("cpu", "gpu", "radar")],
    task_default_queue="cpu",
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # Acknowledge a run when it ends, not when it starts, so a run whose worker vanished is
    # delivered again (the visibility timeout in settings must exceed the longest run).
    task_acks_late=True,
    # task_reject_on_worker_lost stays off: with it, a run killed for using too much memory is
    # redelivered, killed again, redelivered… The database, not the broker, decides re-runs.
    task_reject_on_worker_lost=False,
    # Take one run at a time and start each in a fresh process, so GPU memory and CUDA state
    # never leak from one run into the next.
    worker_prefetch_multiplier=1,
    worker_max_tasks_per_child=1,
    broker_connection_retry_on_startup=True,
)
