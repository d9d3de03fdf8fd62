"""`{% load lifecycle %}{% deleted_note run %}` (or an experiment): the note a page of a run or
experiment an MLflow client deleted shows (`webapp/tracking/lifecycle.py`)."""

from webapp.tracking.lifecycle import register  # noqa: F401 (the tag library)
