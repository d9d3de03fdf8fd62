"""`{% load lifecycle %}{% deleted_note run %}` (or an experiment): the note a page of a run or
experiment an MLflow client deleted shows (`webapp/runs/lifecycle.py`)."""

from webapp.runs.lifecycle import register  # noqa: F401 (the tag library)
