"""The runs explorer's table: MLflow's filter language (its documented examples) through the
REST API's parser with Troupe's fields, columns, sorts, paging, CSV, saved views and the
column choice each user keeps."""

import csv
import io

import pytest

from tests.people import make_experiment
from vocabulary.names import ACCURACY_KEY
from webapp.experiments.models import Run
from webapp.explorer.fields import ExplorerError, parse_column, parse_filter, parse_sort
from webapp.explorer.models import ColumnChoice, SavedView
from webapp.explorer.query import explore
from webapp.explorer.tags import set_run_tag
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db

# MLflow's documented search examples (mlflow.org, "Search Runs"), each read by the parser.
MLFLOW_EXAMPLES = [
    "metrics.rmse < 1 and params.model = 'tree'",
    "metrics.accuracy > 0.9",
    "params.batch_size = '2'",
    "tags.`mlflow.source.type` = 'LOCAL'",
    "tags.mlflow.source.type = 'LOCAL'",
    'attributes.run_name = "my run"',
    "attributes.status = 'ACTIVE'",
    "attributes.start_time >= 1664067852747",
    "run_name LIKE 'my%'",
    "params.model ILIKE '%TREE%'",
    "attributes.run_id IN ('a1b2', 'c3d4')",
    "metrics.`f1 score` >= 0.5",
    "tags.note IS NULL",
    "params.lr IS NOT NULL",
]


@pytest.mark.parametrize("text", MLFLOW_EXAMPLES)
def test_it_reads_every_example_of_mlflows_docs(text):
    assert parse_filter(text)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("metrics.loss <", "metrics.loss <"),
        ("params.lr = 1 or status = 'running'", "or status"),
        ("nonsense.x = 'a'", "Cannot search on 'x'"),
        ("bogus_attribute = 'a'", "bogus_attribute"),
        ("metrics.loss = 'a'", "expected a number"),
        ("params.lr = '1' and ", "ends with AND"),
    ],
)
def test_a_bad_filter_names_where_it_fails(text, where):
    with pytest.raises(ExplorerError, match=where.replace("(", r"\(")):
        parse_filter(text)


def test_troupe_fields_read_as_attributes():
    clauses = parse_filter("cliff_status = 'confirmed' and peak > 0.4 and owner = 'alice'")
    assert [(c.kind, c.name) for c in clauses] == [
        ("attributes", "cliff_status"),
        ("attributes", "peak"),
        ("attributes", "owner"),
    ]
    assert parse_filter("status = 'FINISHED'")[0].value == Run.SUCCEEDED


def test_a_param_may_be_compared_as_a_number():
    (clause,) = parse_filter("params.lr <= 1e-5")
    assert clause.value == pytest.approx(1e-5)
    assert parse_filter("params.lr = '1e-5'")[0].value == "1e-5"


def test_columns_name_a_metric_with_its_aggregate():
    assert parse_column("metrics.loss@max").aggregate == "max"
    assert parse_column("metrics.loss").aggregate == "last"
    with pytest.raises(ExplorerError, match="only a metric"):
        parse_column("params.lr@max")


def _world(alice, bob):
    a = make_experiment(alice, "alpha", runs=3, lr=1e-5)
    b = make_experiment(bob, "beta", runs=2, lr=1e-4, sharing="per_role")
    runs = list(Run.objects.order_by("id"))
    for i, run in enumerate(runs):
        write_points(run.id, [("train/loss", s, 1.0 - 0.1 * i - 0.01 * s) for s in range(5)])
        write_points(run.id, [(ACCURACY_KEY, s, 0.1 * i + 0.05 * s) for s in range(5)])
    Run.objects.filter(id=runs[1].id).update(status=Run.SUCCEEDED)
    return a, b, runs


def _ids(table):
    return [row["id"] for row in table.rows]


def test_it_filters_across_experiments_and_sorts_by_a_metric(alice, bob):
    _, _, runs = _world(alice, bob)
    cols = [parse_column("attributes.run_name"), parse_column("metrics.train/loss@min")]
    table = explore("metrics.`train/loss` < 0.75", cols, parse_sort("metrics.train/loss ASC"))
    # last losses: 0.96, 0.86, 0.76, 0.66, 0.56 → the last two, smallest first
    assert _ids(table) == [runs[4].id, runs[3].id]
    assert table.rows[0]["values"][1] == pytest.approx(0.56)
    assert table.plan == "sql"


@pytest.mark.parametrize(
    ("text", "sort"),
    [
        ("metrics.`train/loss` < 0.75", "metrics.train/loss ASC"),
        ("metrics.`train/loss` != 0.86", "metrics.train/loss@max DESC"),
        ("metrics.nothing IS NULL and seed >= 1", "attributes.seed DESC"),
        ("params.sharing = 'per_role'", "params.sharing ASC"),
        ("params.sharing != 'per_role' and workflow IN ('voting')", "attributes.owner ASC"),
        ("tags.note LIKE '%lr%'", "tags.note DESC"),
        ("tags.note ILIKE 'TRY%'", ""),
        ("tags.note NOT IN ('x')", ""),
        ("peak > 0.3 and cliff_status != 'confirmed'", "attributes.peak ASC"),
        ("status = 'FINISHED' or", ""),
    ],
)
def test_the_database_and_the_row_by_row_check_agree(alice, bob, text, sort):
    """Each query answered by the database, and again with a clause only rows can check
    (`created > 0`, true of every run) forcing the row-by-row path: the same runs, in order."""
    _, _, runs = _world(alice, bob)
    set_run_tag(runs[2], "note", "try a lower lr")
    cols = [parse_column("attributes.seed")]
    if text.endswith(" or"):
        with pytest.raises(ExplorerError, match="AND only"):
            explore(text, cols, parse_sort(sort))
        return
    fast = explore(text, cols, parse_sort(sort))
    slow = explore(f"{text} and created > 0", cols, parse_sort(sort))
    assert (fast.plan, slow.plan) == ("sql", "rows")
    assert _ids(fast) == _ids(slow) and fast.total == slow.total


@pytest.mark.parametrize("pattern, hit", [("%a%a%a%a%a%a%a%b", False), ("%a%a%a%a%a%a_a", True)])
def test_a_like_pattern_that_backtracks_answers_at_once(alice, bob, pattern, hit):
    """'%a%a…%b' against thousands of a's: hours for a regex that backtracks (`%` as `.*`),
    milliseconds for `like_regex`; pytest-timeout fails the test in the first case."""
    _, _, runs = _world(alice, bob)
    set_run_tag(runs[2], "note", "a" * 4000)
    cols = [parse_column("attributes.seed")]
    for text in (f"tags.note LIKE '{pattern}'", f"tags.note LIKE '{pattern}' and created > 0"):
        assert _ids(explore(text, cols, parse_sort(""))) == ([runs[2].id] if hit else [])


def test_like_reads_across_newlines_in_either_database(alice, bob):
    """A note of two lines: `%` spans the newline, and a value is matched to its very end
    (SQLite's REGEXP is Python's `re.search`: without `(?s)` and `\\Z` it missed the first
    and matched 'x\\n' to 'x')."""
    _, _, runs = _world(alice, bob)
    set_run_tag(runs[2], "note", "try a lower lr\nthen more")
    set_run_tag(runs[3], "note", "x\n")
    cols, sort = [parse_column("attributes.seed")], parse_sort("")
    assert _ids(explore("tags.note LIKE '%lr%'", cols, sort)) == [runs[2].id]
    assert _ids(explore("tags.note LIKE 'try%more'", cols, sort)) == [runs[2].id]
    assert _ids(explore("tags.note LIKE 'x'", cols, sort)) == []
    assert _ids(explore("tags.note LIKE 'x_'", cols, sort)) == [runs[3].id]


def test_like_regex_matches_as_like_does():
    """Every pattern of up to five of 'a', 'b', '%', '_' against every value of up to five
    'a's and 'b's, as the backtracking translation answers."""
    import itertools
    import re

    from webapp.tracking.search import like_regex

    def words(alphabet, most):
        for n in range(most + 1):
            yield from map("".join, itertools.product(alphabet, repeat=n))

    values = list(words("ab", 5))
    for pattern in words("ab%_", 5):
        plain = "".join({"%": ".*", "_": "."}.get(c, c) for c in pattern)
        fast = re.compile(like_regex(pattern))
        for value in values:
            assert bool(fast.fullmatch(value)) == bool(re.fullmatch(plain, value)), pattern


def test_it_filters_on_params_owner_and_status(alice, bob):
    _, _, runs = _world(alice, bob)
    cols = [parse_column("params.lr")]
    sort = parse_sort("")
    assert _ids(explore("params.lr <= 1e-5", cols, sort)) == [r.id for r in runs[:3]][::-1]
    assert set(_ids(explore("owner = 'bob'", cols, sort))) == {runs[3].id, runs[4].id}
    only = explore("status = 'FINISHED'", cols, sort)
    assert _ids(only) == [runs[1].id] and only.plan == "sql"


def test_it_filters_on_tags_and_verdicts(alice, bob):
    _, _, runs = _world(alice, bob)
    set_run_tag(runs[2], "note", "try a lower lr")
    sort = parse_sort("attributes.peak DESC")
    cols = [parse_column("attributes.peak"), parse_column("tags.note")]
    table = explore("tags.note LIKE '%lr%' and peak > 0.3", cols, sort)
    assert _ids(table) == [runs[2].id]
    assert table.rows[0]["values"] == [pytest.approx(0.4), "try a lower lr"]


def test_pages_cut_the_sorted_matches(alice, bob):
    _, _, runs = _world(alice, bob)
    table = explore("", [parse_column("attributes.seed")], parse_sort(""), page=2, page_size=2)
    assert table.total == 5 and table.pages == 3
    assert _ids(table) == [runs[2].id, runs[1].id]


def test_the_page_shows_a_bad_filter_as_a_message_not_a_500(client, alice):
    client.force_login(alice)
    response = client.get("/explore/", {"q": "metrics.loss >> 3"})
    assert response.status_code == 400
    assert "Cannot read the filter" in response.content.decode()


def test_the_page_lists_runs_and_sorts_by_a_header(client, alice, bob):
    _, _, runs = _world(alice, bob)
    client.force_login(bob)
    response = client.get("/explore/", {"q": "experiment = 'alpha'", "sort": "attributes.seed ASC"})
    body = response.content.decode()
    assert response.status_code == 200
    positions = [body.index(f'data-run="{r.id}"') for r in runs[:3]]
    assert positions == sorted(positions)
    assert f'data-run="{runs[3].id}"' not in body


def test_the_csv_holds_exactly_the_tables_columns_and_rows(client, alice, bob):
    _, _, runs = _world(alice, bob)
    client.force_login(alice)
    response = client.get(
        "/explore/runs.csv",
        {
            "q": "owner = 'bob'",
            "cols": "attributes.seed,metrics.train/loss",
            "sort": "attributes.seed ASC",
        },
    )
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["run", "attributes.seed", "metrics.train/loss"]
    assert [r[0] for r in rows[1:]] == [str(runs[3].id), str(runs[4].id)]
    assert float(rows[1][2]) == pytest.approx(0.66)


def test_the_column_choice_is_remembered_per_user(client, alice, bob):
    _world(alice, bob)
    client.force_login(alice)
    client.post("/explore/columns/", {"cols": "attributes.seed,params.lr"})
    assert ColumnChoice.objects.get(user=alice).columns == ["attributes.seed", "params.lr"]
    body = client.get("/explore/").content.decode()
    assert 'data-spec="params.lr"' in body
    client.force_login(bob)
    assert 'data-spec="params.lr"' not in client.get("/explore/").content.decode()


def test_a_saved_view_is_its_owners(client, alice, bob):
    client.force_login(alice)
    client.post("/explore/views/", {"name": "low lr", "query": "q=params.lr+%3C%3D+1e-5"})
    view = SavedView.objects.get(owner=alice)
    assert "low lr" in client.get("/explore/").content.decode()
    client.force_login(bob)
    assert client.post(f"/explore/views/{view.id}/delete/").status_code == 404
    assert SavedView.objects.filter(id=view.id).exists()


def test_the_json_gives_the_chosen_runs_values(client, alice, bob):
    _, _, runs = _world(alice, bob)
    client.force_login(alice)
    body = client.get(
        "/explore/runs.json",
        {"runs": f"{runs[0].id},{runs[4].id}", "cols": "attributes.seed,attributes.peak"},
    ).json()
    assert body["runs"] == [runs[4].id, runs[0].id]
    assert body["values"][1] == [0, pytest.approx(0.2)]


def test_a_brush_filters_every_page_the_count_and_the_csv(client, alice, bob):
    """The parallel coordinates' brush is part of the query: with the search, it cuts the
    whole result (not the rows on screen), so the count, the pages and the CSV follow it."""
    _, _, runs = _world(alice, bob)
    client.force_login(alice)
    # peaks 0.2, 0.3, 0.4, 0.5, 0.6: the search keeps four, the brush two of them
    query = {"q": "peak > 0.25", "brush": "attributes.peak >= 0.35 and attributes.peak <= 0.55"}
    body = client.get("/explore/", query).content.decode()
    assert "2 runs" in body
    assert [f'data-run="{r.id}"' in body for r in runs] == [False, False, True, True, False]
    assert "attributes.peak &gt;= 0.35" in body  # shown, with a link that clears it
    sort_link = client.get("/explore/", query).context["headers"][0]["href"]
    assert "brush=" in sort_link
    csv_rows = list(
        csv.reader(
            io.StringIO(client.get("/explore/runs.csv", {**query, "all": "1"}).content.decode())
        )
    )
    assert sorted(r[0] for r in csv_rows[1:]) == sorted(str(r.id) for r in runs[2:4])
    cleared = client.get("/explore/", {"q": "peak > 0.25"}).content.decode()
    assert "4 runs" in cleared


def test_a_bad_brush_is_a_message_not_a_500(client, alice):
    client.force_login(alice)
    response = client.get("/explore/", {"brush": "attributes.peak >>= 1"})
    assert response.status_code == 400
    assert "Cannot read the filter" in response.content.decode()


def test_every_link_for_the_selected_runs_opens_a_page(client, alice, bob):
    """The action links the table offers for the runs ticked, the panel's aside (the
    attribution one once led to a POST-only URL: a 405)."""
    import re

    _, _, runs = _world(alice, bob)
    client.force_login(alice)
    page = client.get("/explore/").content.decode()
    links = re.findall(r'data-explorer-link="([^"]+)"(\s+data-explorer-single)?', page)
    assert len(links) >= 5
    ids = [str(runs[0].id), str(runs[1].id)]
    for base, single in links:
        if base.startswith("/dash/"):  # the panel's mount: tests/webapp/test_dash_mount.py
            continue
        base = base.replace("&amp;", "&")
        url = base.replace("{id}", ids[0]) if single else base + ",".join(ids)
        response = client.get(url)
        assert response.status_code == 200, url


def test_the_table_names_a_cliff_verdict_in_the_words_of_every_page(client, alice, bob):
    """The column once showed the code ("insufficient") where every other page says "too few
    evaluations"; the code (what a filter compares) is on hover."""
    import re

    from analysis.cliffs import STATUS_WORDS

    _world(alice, bob)
    few = make_experiment(alice, "few").runs.get()
    write_points(few.id, [(ACCURACY_KEY, s, 0.2) for s in range(2)])  # too few to judge
    client.force_login(alice)
    cols = "attributes.run_name,attributes.cliff_status"
    page = client.get("/explore/", {"cols": cols}).content.decode()
    cells = dict(re.findall(r'title="cliff_status = &#x27;(\w+)&#x27;">([^<]*)<', page))
    assert cells and all(text == STATUS_WORDS[code] for code, text in cells.items())
    assert cells["insufficient"] == "too few evaluations" and cells["none"] == "none"
