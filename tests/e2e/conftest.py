"""Fixtures of the browser and product tests: the people of tests/people.py and the tiny
model of tests/runs.py. Playwright's assertions wait longer than its 5 s default: on CI's
two cores a page's script shares them with gunicorn, a Celery worker and training runs."""

from playwright.sync_api import expect

from tests.people import alice, bob, carol, experiment, run  # noqa: F401
from tests.runs import tiny_model  # noqa: F401

expect.set_options(timeout=20_000)
