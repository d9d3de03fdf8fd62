"""Whether a built-in tiny model must be warm-started before a run of it trains, said in the
form before anything is queued (a tiny-m run once showed its 2.5–3.7 hour warm start only
after it was queued).

tiny-s ships built (`trainer/weights/`); tiny-m and tiny-l are built by the first run that
uses them on a worker and cached under `$TROUPE_DATA_DIR/models/<name>-<recipe hash>/`
(trainer/tiny.py). The web process cannot compute the recipe hash (it would import torch),
so a model counts as ready when a shipped or cached copy of any hash is there: after a change
of recipe the note may be missing once, never shown for a model that needs no warm start at
all in a fresh deployment.

The times: tiny-s's 3,000 steps take 8–15 minutes on two idle cores (docs/cli.md); a step of
tiny-m costs about 2.3× one of tiny-s, and one of tiny-l about 3.7× one of tiny-m (8.5× tiny-s;
one torch thread, batch 64 × 96 tokens, measured side by side on a shared two-core machine,
the ratios varying ±20% with its load); the steps are trainer/tiny.py's RECIPE. On cores
shared with other work it is many times longer: tiny-m ran 11.7 s a step at load 14 on two
cores, 3.9 hours.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

SHIPPED = Path(__file__).resolve().parents[2] / "trainer" / "weights"
# (warm-start steps, minutes on two idle cores: low, high); see the module's docstring
WARM_START = {"tiny-s": (3000, 8, 15), "tiny-m": (1200, 7, 14), "tiny-l": (1000, 23, 43)}


def is_ready(model: str) -> bool:
    """Whether a built copy of the tiny `model` is shipped or cached here."""
    if any(SHIPPED.glob(f"{model}-*/config.json")):
        return True
    return any((settings.DATA_DIR / "models").glob(f"{model}-*/done"))


def warm_start_note(models: list[str]) -> str:
    """What to tell the user before queueing runs of `models`: "" when none needs a warm
    start."""
    waiting = [m for m in models if m in WARM_START and not is_ready(m)]
    if not waiting:
        return ""
    times = ", ".join(
        f"{m} about {WARM_START[m][1]}–{WARM_START[m][2]} minutes ({WARM_START[m][0]:,} steps)"
        for m in waiting
    )
    return (
        f"Not built on this server yet: {', '.join(waiting)}. The first run of each warm-starts "
        f"it on its worker before training — {times} on two idle CPU cores, and hours where "
        "the cores are shared with other work. Later runs reuse it."
    )
