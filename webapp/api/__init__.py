"""The JSON API under /api/v1/ (DESIGN.md §7): `http.py` (auth, errors, bodies), `views.py`."""
