"""`{% load key_names %}{% key_names_panel run %}`: the run page's card of Troupe names and the
keys they were taken from (`webapp/tracking/key_names.py`)."""

from webapp.tracking.key_names import register  # noqa: F401 (the tag library)
