"""Words for the panel: how runs, cells, sharing modes and numbers are named on screen.

Figures, tables and CSV headers all name things through these helpers, so a run reads the
same in a legend, a hover box and a table row. Figures pass every name a user chose through
`plot_text` first; tables need not (Dash shows their text as text).
"""

from __future__ import annotations

import html
from typing import Any

from trainer.config import SHARING, TASKS, WORKFLOWS
from trainer.routing import WORKFLOW_TABLE
from vocabulary.names import ACCURACY_KEY, PER_AGENT, PER_ROLE, REWARD_KEY, SHARED, SHARING_MODES

SHARING_NAMES = {
    SHARED: "Shared policy",
    PER_ROLE: "Isolated: one policy per role",
    PER_AGENT: "One policy per agent",
}
SHARING_SHORT = {mode: mode.replace("_", "-") for mode in SHARING_MODES}  # per-role
WORKFLOW_NAMES = {name: spec.title for name, spec in WORKFLOW_TABLE.items()}
MODEL_ORDER = ("tiny-s", "tiny-m", "tiny-l", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B")
KEY_NAMES = {
    ACCURACY_KEY: "held-out accuracy (pass@1)",
    REWARD_KEY: "training reward",
}


def ordered(values, known: tuple) -> list:
    """Known values in their canonical order, then the rest alphabetically."""
    values = set(values)
    return [v for v in known if v in values] + sorted(v for v in values if v not in known)


def sharing_order(values) -> list[str]:
    return ordered(values, SHARING)


def workflow_order(values) -> list[str]:
    return ordered(values, WORKFLOWS)


def task_order(values) -> list[str]:
    return ordered(values, TASKS)


def model_order(values) -> list[str]:
    return ordered(values, MODEL_ORDER)


def workflow_name(workflow: str) -> str:
    return WORKFLOW_NAMES.get(workflow, workflow or "—")


def sharing_name(sharing: str) -> str:
    return SHARING_NAMES.get(sharing, sharing or "—")


def cell_label(workflow: str, task: str, model: str | None = None) -> str:
    parts = [workflow_name(workflow), task or "—"] + ([model] if model else [])
    return " · ".join(parts)


def run_label(run) -> str:
    """'run 7 · Voting · math · tiny-s · per-role · seed 0' (or the run's own name)."""
    if run.name:
        return f"run {run.id} · {run.name}"
    sharing = SHARING_SHORT.get(run.sharing, run.sharing or "—")
    cell = cell_label(run.workflow, run.task, run.model)
    return f"run {run.id} · {cell} · {sharing} · seed {run.seed}"


def experiment_label(experiment) -> str:
    """'sweep (#5, 12 runs)': `experiment` carries its run count as `n_runs`."""
    runs = "1 run" if experiment.n_runs == 1 else f"{experiment.n_runs} runs"
    return f"{experiment.name} (#{experiment.id}, {runs})"


def plot_text(text: str) -> str:
    """`text` as plotly will show it, literally. Plotly renders a subset of HTML in titles,
    legends, ticks, hover boxes and annotations (<a href>, <span style>, <b>, <br>) and fills
    in %{…} in hover templates, so a run, model, role or metric name could otherwise add a
    link or restyle the panel. Plotly turns &lt; &gt; &amp; and &#NNN; back into characters
    (not &quot;, hence quote=False)."""
    return html.escape(str(text), quote=False).replace("%{", "%&#123;")


def key_name(key: str) -> str:
    return f"{key} — {KEY_NAMES[key]}" if key in KEY_NAMES else key


def num(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def signed(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"
