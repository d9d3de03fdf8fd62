"""Branching a run from one of its kept checkpoints, and the branch form, page and API."""
