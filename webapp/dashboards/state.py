"""Page state in the URL: parsing the query strings the panel accepts and building its links.

`/dash/matrix?experiment=5&colour=final_gain`, `/dash/compare?runs=3,7,9&key=eval/accuracy`,
`/dash/gradients?runs=3,7`, `/dash/bands?experiment=5&by=lr`: the Django pages link straight
into a view, and every control a page has is mirrored into its URL, so the address bar is
always a link to what is on screen.
Parsing is forgiving — a junk value is ignored, never an error page.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

from vocabulary.names import ACCURACY_KEY
from webapp.ids import whole_number

PREFIX = "/dash"
DEFAULT_KEY = ACCURACY_KEY


def _last(value) -> str:
    """Dash passes a repeated query parameter as a list: the last one wins, as in Django."""
    if isinstance(value, list):
        value = value[-1] if value else ""
    return "" if value is None else str(value)


def parse_int(value) -> int | None:
    return whole_number(_last(value))


def parse_ids(value) -> list[int]:
    """'3,7,9' → [3, 7, 9]: order kept, repeats and anything not a number dropped."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return list(dict.fromkeys(value))
    parts = _last(value).replace(" ", ",").split(",")
    ids = [n for p in parts if (n := whole_number(p)) is not None]
    return list(dict.fromkeys(ids))


def parse_choice(value, allowed: Iterable[str], default: str) -> str:
    text = _last(value)
    return text if text in set(allowed) else default


def query(**params) -> str:
    """'?a=1&b=x/y': parameters in the order given, empty ones left out; '/', ',' and '|'
    stay readable (they are legal in a query string)."""
    parts = []
    for name, value in params.items():
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        parts.append(f"{name}={quote(str(value), safe='/,|')}")
    return "?" + "&".join(parts) if parts else ""


def matrix_url(experiment_id: int | None, colour: str | None = None) -> str:
    return f"{PREFIX}/matrix" + query(experiment=experiment_id, colour=colour)


def compare_url(run_ids: Iterable[int], key: str | None = None) -> str:
    return f"{PREFIX}/compare" + query(runs=list(run_ids), key=key)


def bands_url(experiment_id: int | None = None, run_ids: Iterable[int] = ()) -> str:
    return f"{PREFIX}/bands" + query(runs=list(run_ids), experiment=experiment_id)


def attribution_url(experiment_id: int | None) -> str:
    return f"{PREFIX}/attribution" + query(experiment=experiment_id)


def gradients_url(run_ids: Iterable[int]) -> str:
    return f"{PREFIX}/gradients" + query(runs=list(run_ids))
