"""Number formats of the statistics page: signed differences and p-values."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def signed(value, digits: int = 3) -> str:
    """+0.041 / −0.012 / — for a missing value (a difference reads better with its sign)."""
    if value is None or value == "":
        return "—"
    text = f"{float(value):+.{int(digits)}f}"
    return text.replace("-", "−")


@register.filter
def pvalue(value) -> str:
    """A p-value to two significant figures, "< 0.001" below that."""
    if value is None:
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.2g}"
