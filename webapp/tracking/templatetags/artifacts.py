"""`{% load artifacts %}{% artifact_panel run %}`: the run page's artifact list
(`webapp/tracking/artifact_pages.py`)."""

from webapp.tracking.artifact_pages import register  # noqa: F401 (the tag library)
