"""Tiny inline-SVG sparklines for the run page: a series scaled into a fixed box.

The page draws the first frame on the server (`sparkline`); its script redraws with the same
arithmetic (static/run_page.js) from the `steps` and `values` the live document carries.
"""

from __future__ import annotations

WIDTH, HEIGHT, PAD = 240, 48, 3


def sparkline(key: str, series: dict | None) -> dict:
    """{"key", "points" (SVG polyline), "last", "low", "high", "steps", "values", "first_step",
    "last_step"} (the steps at the box's left and right edges: a click maps back to a step)."""
    steps = list((series or {}).get("steps", []))
    values = list((series or {}).get("values", []))
    pairs = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None]
    out = {"key": key, "points": "", "last": None, "low": None, "high": None,
           "steps": steps, "values": values, "width": WIDTH, "height": HEIGHT,
           "first_step": None, "last_step": None}  # fmt: skip
    if not pairs:
        return out
    s0, s1 = pairs[0][0], pairs[-1][0]
    low, high = min(v for _, v in pairs), max(v for _, v in pairs)
    span_s, span_v = (s1 - s0) or 1, (high - low) or 1

    def x(s: float) -> float:
        return PAD + (s - s0) / span_s * (WIDTH - 2 * PAD) if s1 != s0 else WIDTH / 2

    def y(v: float) -> float:
        return HEIGHT - PAD - (v - low) / span_v * (HEIGHT - 2 * PAD) if high != low else HEIGHT / 2

    out["points"] = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in pairs)
    out.update(last=pairs[-1][1], low=low, high=high, first_step=s0, last_step=s1)
    return out
