"""`{% load episodes %}{% episode_panel run %}`: the run page's list of a step's recorded
episodes (`webapp/episodes/pages.py`)."""

from webapp.episodes.pages import register  # noqa: F401 (the tag library)
