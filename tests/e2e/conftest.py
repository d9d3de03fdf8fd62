"""Fixtures of this folder: the owner, teammate and staff of tests/people.py."""

from tests.people import alice, bob, carol, experiment, run  # noqa: F401
