"""Fixtures of the browser and product tests: the people of tests/people.py and the tiny
model of tests/runs.py."""

from tests.people import alice, bob, carol, experiment, run  # noqa: F401
from tests.runs import tiny_model  # noqa: F401
