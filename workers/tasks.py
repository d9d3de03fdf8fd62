"""Celery tasks. Task bodies import heavy libraries (torch) inside the function, so the
worker's parent process never loads them and never initialises CUDA."""

import os

from workers.celery_app import app


@app.task(bind=True)
def ping(self) -> dict:
    """Answer with where the task ran: proves a message went broker → worker → result."""
    return {"pong": True, "hostname": self.request.hostname, "pid": os.getpid()}
