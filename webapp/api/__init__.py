"""The JSON API under /api/v1/ (docs/design.md §7): `http.py` (auth, errors, bodies), `views.py`."""
