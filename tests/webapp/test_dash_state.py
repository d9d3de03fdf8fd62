"""Page state in the URL (webapp/dashboards/state.py): forgiving parsing, readable links, and
each page's layout built from its query string."""

from webapp.dashboards import state
from webapp.dashboards.pages import compare, gradients, matrix


def test_run_ids_parse_forgivingly():
    assert state.parse_ids("3,7,9") == [3, 7, 9]
    assert state.parse_ids("9, 3,x,,3") == [9, 3]
    assert state.parse_ids(["1,2", "5"]) == [5]  # a repeated parameter: the last one wins
    assert state.parse_ids(None) == [] and state.parse_ids([4, 4, 2]) == [4, 2]
    assert state.parse_int("12") == 12 and state.parse_int("-1") is None
    assert state.parse_choice("seed", ("sharing", "seed"), "sharing") == "seed"
    assert state.parse_choice("<script>", ("sharing", "seed"), "sharing") == "sharing"


def test_links_stay_readable():
    assert state.compare_url([3, 7], "eval/accuracy") == "/dash/compare?runs=3,7&key=eval/accuracy"
    assert state.compare_url([3], "grad_cos/a|b") == "/dash/compare?runs=3&key=grad_cos/a|b"
    assert state.matrix_url(5) == "/dash/matrix?experiment=5"
    assert state.gradients_url([3, 7]) == "/dash/gradients?runs=3,7"
    assert state.query(a=None, b="", c=[]) == ""
    assert state.query(key="a b&c") == "?key=a%20b%26c"


def find(component, id_):
    """The component with `id_` in a layout tree (None when absent)."""
    if getattr(component, "id", None) == id_:
        return component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if child is None or isinstance(child, (str, int, float)):
            continue
        hit = find(child, id_)  # not `if find(…)`: an empty component is falsy (len 0)
        if hit is not None:
            return hit
    return None


def test_layouts_start_from_the_url():
    page = compare.layout(runs="3,7", key="train/kl", smooth="5", colour="seed")
    assert find(page, "curves-runs").value == [3, 7]
    assert [o["value"] for o in find(page, "curves-runs").options] == [3, 7]
    assert find(page, "curves-key").value == "train/kl"
    assert find(page, "curves-smooth").value == "5"
    assert find(page, "curves-colour").value == "seed"

    page = matrix.layout(experiment="5", colour="final_gain")
    assert find(page, "matrix-experiment").value == 5
    assert find(page, "matrix-colour").value == "final_gain"

    assert find(gradients.layout(runs="3,7"), "gradients-runs").value == [3, 7]


def test_layouts_ignore_junk_and_need_no_parameters():
    page = compare.layout(runs="x", smooth="7", colour="nope", unknown="1")
    assert find(page, "curves-runs").value == []
    assert find(page, "curves-key").value == "eval/accuracy"
    assert find(page, "curves-smooth").value == "0"
    assert find(matrix.layout(), "matrix-experiment").value is None
