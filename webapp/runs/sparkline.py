"""Tiny inline-SVG sparklines for the run page: a series scaled into a fixed box.

The server computes every coordinate (`sparkline`); the page draws the first frame from them
and its script (static/run_page.js) redraws from the same fields in live.json, so the two
never disagree. A point with no finite value (NaN or ±inf, which the store keeps as a gap,
None) breaks the line, and a red × marks where: where `analysis.gaps` places it (as the panel's
figures do), with a hover title "NaN/inf at step N": a diverging loss shows where it diverged
instead of vanishing.
"""

from __future__ import annotations

from analysis.gaps import gap_marks, gap_title

WIDTH, HEIGHT, PAD = 240, 48, 3
CROSS = 3  # half the size of a gap's ×, in SVG units


def sparkline(key: str, series: dict | None) -> dict:
    """{"key", "segments" (SVG polyline points, one per unbroken stretch), "gaps" ([{"step",
    "title", "d"}]: each stretch of gaps at its first step, `d` its × as an SVG path),
    "last" (the newest finite value), "last_gap" (the newest point is a gap), "low", "high",
    "steps", "values", "first_step", "last_step"} (the steps at the box's left and
    right edges: a click maps back to a step)."""
    steps = list((series or {}).get("steps", []))
    values = list((series or {}).get("values", []))
    pairs = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None]
    out = {
        "key": key,
        "segments": [],
        "gaps": [],
        "last": None,
        "low": None,
        "high": None,
        "last_gap": bool(values) and values[-1] is None,
        "steps": steps,
        "values": values,
        "width": WIDTH,
        "height": HEIGHT,
        "first_step": None,
        "last_step": None,
    }
    if not steps:
        return out
    s0, s1 = steps[0], steps[-1]  # the whole run's steps, gaps included
    low = min((v for _, v in pairs), default=0.0)
    high = max((v for _, v in pairs), default=0.0)
    span_s, span_v = (s1 - s0) or 1, (high - low) or 1

    def x(s: float) -> float:
        return PAD + (s - s0) / span_s * (WIDTH - 2 * PAD) if s1 != s0 else WIDTH / 2

    def y(v: float) -> float:
        return HEIGHT - PAD - (v - low) / span_v * (HEIGHT - 2 * PAD) if high != low else HEIGHT / 2

    segments: list[list[str]] = [[]]
    for s, v in zip(steps, values, strict=True):
        if v is not None:
            segments[-1].append(f"{x(s):.1f},{y(v):.1f}")
        elif segments[-1]:
            segments.append([])
    for s, level in gap_marks(steps, values):
        cx, cy = x(s), HEIGHT / 2 if level is None else y(level)
        out["gaps"].append(
            {
                "step": s,
                "title": gap_title(s),
                "d": f"M{cx - CROSS:.1f},{cy - CROSS:.1f}L{cx + CROSS:.1f},{cy + CROSS:.1f}"
                f"M{cx - CROSS:.1f},{cy + CROSS:.1f}L{cx + CROSS:.1f},{cy - CROSS:.1f}",
            }
        )
    # A lone point between gaps is drawn as a zero-length line: its round caps make a dot.
    out["segments"] = [
        " ".join(points * (2 if len(points) == 1 else 1)) for points in segments if points
    ]
    if pairs:
        out.update(last=pairs[-1][1], low=low, high=high)
    out.update(first_step=s0, last_step=s1)
    return out
