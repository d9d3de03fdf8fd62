"""How gunicorn serves Troupe, wherever it runs (`make run`, docker compose):
`gunicorn webapp.wsgi --config python:webapp.gunicorn_conf`.

Threaded workers (`gthread`), because a request may take minutes: a large `log_artifact` or
`download_artifacts` over a slow link streams for as long as the link needs. gunicorn's
default sync worker serves one request at a time and is killed by the arbiter when a
request outlasts `timeout` (30 s), so such a transfer failed, and every other request — an
MLflow client's `log_metric` — queued behind it. A gthread worker's main loop
reports to the arbiter while its threads serve, so `timeout` bounds a stuck worker, never
a request; bodies are streamed to and from disk by the artifact views, so a thread holds a
few buffers, not the file. Metric writes take another thread of the pool while transfers
run: `TROUPE_WEB_THREADS` threads a worker (8), `TROUPE_WEB_WORKERS` workers (2); each
thread that served a request keeps a database connection (`CONN_MAX_AGE`).
"""

from webapp.env import env_int

worker_class = "gthread"
workers = env_int("TROUPE_WEB_WORKERS", 2, minimum=1)  # a bad value stops the start, named
threads = env_int("TROUPE_WEB_THREADS", 8, minimum=1)
timeout = 30  # a worker whose main loop is silent this long is restarted; not per request
graceful_timeout = 10  # on SIGTERM, requests in flight get this long to finish
keepalive = 5  # seconds an idle client connection stays open (MLflow's client reuses them)
