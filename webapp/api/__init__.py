"""The JSON API under /api/v1/ (docs/design.md §7): `views.py` (runs, metrics, experiments) and
`urls.py`, which gathers every app's endpoints; their plumbing is `webapp/jsonapi/`."""
