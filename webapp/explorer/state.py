"""The explorer's state as its URL holds it: `q` (the filter), `brush` (the ranges brushed on
the parallel coordinates, in the same filter language, applied with `q`), `cols`
(comma-separated columns), `sort` (`<column> [ASC|DESC]`) and `page`. A link, a saved view and
the back button all restore a table from these alone; a user's last chosen columns stand in
for a missing `cols`."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import QueryDict

from webapp.explorer.fields import DEFAULT_COLUMNS, Column, parse_columns, parse_sort
from webapp.explorer.models import ColumnChoice

MAX_FILTER = 5000  # characters, as the REST API's search allows


@dataclass
class State:
    q: str
    columns: list[Column]
    sort: tuple[Column, bool]
    page: int
    cols_given: bool
    brush: str = ""

    @property
    def filter(self) -> str:
        """The filter the table applies: the search and the brush, both holding (MLflow's
        language has only `and`, so joining two filters with it keeps each one's meaning)."""
        return " and ".join(part for part in (self.q.strip(), self.brush.strip()) if part)

    @property
    def sort_text(self) -> str:
        column, descending = self.sort
        return f"{column.spec} {'DESC' if descending else 'ASC'}"

    def query(self, **changes) -> str:
        """This state's query string, with `changes` (q, brush, cols, sort, page) applied."""
        values = {
            "q": self.q,
            "brush": self.brush,
            "cols": ",".join(c.spec for c in self.columns),
            "sort": self.sort_text,
            "page": str(self.page),
        }
        values.update({k: str(v) for k, v in changes.items()})
        if values["page"] == "1":
            del values["page"]
        return urlencode({k: v for k, v in values.items() if v})


def remembered_columns(user) -> list[str]:
    choice = ColumnChoice.objects.filter(user=user).values_list("columns", flat=True).first()
    return list(choice or DEFAULT_COLUMNS)


def split_columns(raw: str) -> list[str]:
    """Columns are comma-separated; a metric key holding a comma is quoted with backticks."""
    out, current, quoted = [], "", False
    for char in raw:
        if char == "`":
            quoted = not quoted
        if char == "," and not quoted:
            out.append(current)
            current = ""
        else:
            current += char
    out.append(current)
    return [c.strip() for c in out if c.strip()]


def read_state(params: QueryDict, user) -> State:
    """The state of a request's query string; ExplorerError names a bad column or sort."""
    q = params.get("q", "")[:MAX_FILTER]
    raw = params.get("cols")
    columns = parse_columns(split_columns(raw) if raw else remembered_columns(user))
    sort = parse_sort(params.get("sort", ""))
    try:
        page = max(1, int(params.get("page", "1")))
    except ValueError:
        page = 1
    brush = params.get("brush", "")[:MAX_FILTER]
    return State(q, columns, sort, page, raw is not None, brush)
