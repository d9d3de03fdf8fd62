"""Shapley attribution over role swaps (analysis/attribution.py): planted tables whose answer
is known by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from analysis.attribution import (
    attribute,
    coalition_key,
    parse_coalition_key,
    plan_coalitions,
)
from analysis.intervals import Estimate

ROLES = ["a", "b", "c"]
# v(S) for a synthetic 3-role workflow (accuracy with the roles in S trained).
TABLE = {
    "-": Fraction(0),
    "a": Fraction(1, 10),
    "b": Fraction(2, 10),
    "c": Fraction(0),
    "a+b": Fraction(4, 10),
    "a+c": Fraction(1, 10),
    "b+c": Fraction(3, 10),
    "a+b+c": Fraction(6, 10),
}


def per_problem(table, spread=Fraction(1, 10)):
    """Two problems per coalition whose mean is the table's value (so the bootstrap has
    something to resample)."""
    return {
        parse_coalition_key(k): [float(v - spread), float(v + spread)] for k, v in table.items()
    }


def test_the_exact_shapley_values_of_three_roles_match_a_hand_computation():
    # φ_a = 1/3·(v(a)−v(∅)) + 1/6·(v(ab)−v(b)) + 1/6·(v(ac)−v(c)) + 1/3·(v(abc)−v(bc))
    #     = 1/3·0.1 + 1/6·0.2 + 1/6·0.1 + 1/3·0.3 = 11/60
    # φ_b = 1/3·0.2 + 1/6·0.3 + 1/6·0.3 + 1/3·0.5 = 20/60
    # φ_c = 1/3·0   + 1/6·0   + 1/6·0.1 + 1/3·0.2 =  5/60
    result = attribute(ROLES, per_problem(TABLE))
    assert result["method"] == "shapley" and result["problems"] == 2
    shares = {role: result["shares"][role]["value"] for role in ROLES}
    assert shares == pytest.approx({"a": 11 / 60, "b": 20 / 60, "c": 5 / 60}, abs=1e-12)
    assert result["change"]["value"] == pytest.approx(0.6)
    assert sum(shares.values()) == pytest.approx(result["change"]["value"])  # efficiency
    # interaction: 0.6 − (0.1 + 0.2 + 0) = 0.3, gain no single swap delivers on its own
    assert result["interaction"]["value"] == pytest.approx(0.3)
    assert result["accuracy"]["a+b"] == pytest.approx(0.4)


def test_a_role_whose_swap_changes_nothing_gets_exactly_zero():
    # c is a frozen role: taking it from the trained run changes no problem's accuracy
    table = {k: v for k, v in TABLE.items()}
    for key in list(table):
        if "c" in key:
            table[key] = table["+".join(r for r in key.split("+") if r != "c") or "-"]
    result = attribute(ROLES, per_problem(table))
    assert result["shares"]["c"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert result["shares"]["a"]["value"] > 0


def test_the_interval_comes_from_a_paired_bootstrap_over_problems():
    # Every problem improves by the same 0.25 when b is trained: a paired resample of
    # problems cannot move that, whatever the problems' own spread.
    base = [0.0, 0.5, 1.0, 0.25]
    table = {
        frozenset(): base,
        frozenset({"a"}): base,
        frozenset({"b"}): [x + 0.25 for x in base],
        frozenset({"a", "b"}): [x + 0.25 for x in base],
    }
    result = attribute(["a", "b"], table)
    assert result["shares"]["b"] == pytest.approx({"value": 0.25, "low": 0.25, "high": 0.25})
    assert result["shares"]["a"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    noisy = {**table, frozenset({"a", "b"}): [0.0, 1.0, 1.0, 1.0]}
    shares = attribute(["a", "b"], noisy)["shares"]["a"]
    assert shares["low"] < shares["value"] < shares["high"]
    assert attribute(["a", "b"], noisy) == attribute(["a", "b"], noisy)  # seeded


def test_a_stored_interval_reads_back_into_an_estimate_and_writes_the_same_json():
    result = attribute(ROLES, per_problem(TABLE))
    stored = [result["change"], result["interaction"], *result["shares"].values()]
    for interval in stored:
        assert list(interval) == ["value", "low", "high"]
        estimate = Estimate.from_share(interval)
        assert estimate.method == "bootstrap" and estimate.low <= estimate.mean <= estimate.high
        assert estimate.as_share() == interval


def test_up_to_four_roles_every_subset_is_planned_beyond_it_leave_one_out():
    assert len(plan_coalitions(["a", "b", "c", "d"])) == 16
    five = ["a", "b", "c", "d", "e"]
    planned = plan_coalitions(five)
    assert len(planned) == 7 and frozenset() in planned and frozenset(five) in planned
    table = {c: [float(len(c))] for c in planned}  # each trained role adds 1
    result = attribute(five, table)
    assert result["method"] == "leave_one_out"
    assert {r: s["value"] for r, s in result["shares"].items()} == dict.fromkeys(five, 1.0)
    assert result["interaction"]["value"] == 0.0


def test_a_missing_or_unpaired_evaluation_is_named():
    table = per_problem(TABLE)
    del table[frozenset({"a", "c"})]
    with pytest.raises(ValueError, match="coalition.*a\\+c"):
        attribute(ROLES, table)
    table = per_problem(TABLE)
    table[frozenset()] = [0.0]
    with pytest.raises(ValueError, match="same problems"):
        attribute(ROLES, table)


def test_coalition_keys_read_back():
    for coalition in plan_coalitions(ROLES):
        assert parse_coalition_key(coalition_key(coalition, ROLES)) == coalition
