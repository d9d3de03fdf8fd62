"""The gradient-dynamics table says whether a role's gradient norm amplified in words that
tell "not amplified" from "too few steps to judge" (both were "—"), and its CSV keeps the
status beside the onset."""

from __future__ import annotations

from types import SimpleNamespace

from analysis.amplification import amplification_label
from analysis.runs import summarize_run
from tests.analysis.test_verdicts_round3 import DUST
from webapp.dashboards import tables


def test_the_gradients_table_tells_not_amplified_from_too_few_steps():
    assert amplification_label("amplified", 140) == "@140"
    assert amplification_label("none", None) == "not amplified"
    assert amplification_label("too_few_steps", None) == "too few steps to judge"
    flat = [0.05 + 0.001 * (i % 3) for i in range(50)]
    rows = {}
    for name, values in (("dust", DUST), ("flat", flat)):
        summary = summarize_run({"role/generator/grad_norm": (list(range(50)), values)})
        run = SimpleNamespace(
            id=name, workflow="voting", task="math", model="tiny-s", sharing="per_role", seed=0
        )
        (rows[name],) = tables.dynamics_rows([run], {name: summary})
    assert rows["dust"]["amplification"] == "too few steps to judge"
    assert rows["flat"]["amplification"] == "not amplified"
    assert tables.show(rows["flat"]["amplification"], "text") != tables.show(
        rows["dust"]["amplification"], "text"
    )
    assert rows["dust"]["amplification_status"] == "too_few_steps"  # and in the CSV
    assert "amplification_status" in tables.DYNAMICS_CSV
