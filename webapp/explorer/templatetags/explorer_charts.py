"""`{% saved_charts experiment %}`: the charts saved on an experiment (`charts.py` draws
them), for its page."""

from __future__ import annotations

from urllib.parse import urlencode

from django import template

from webapp.explorer import charts
from webapp.explorer.fields import ExplorerError
from webapp.explorer.models import SavedChart
from webapp.runs.access import can_manage

register = template.Library()


@register.inclusion_tag("explorer/_saved_charts.html", takes_context=True)
def saved_charts(context, experiment) -> dict:
    shown = []
    for chart in SavedChart.objects.filter(experiment=experiment):
        try:
            fig = charts.figure(chart.spec).to_json()
        except ExplorerError:
            continue  # a field the explorer no longer reads: the chart is left out
        spec = {**chart.spec, "runs": ",".join(map(str, chart.spec["runs"]))}
        chart.figure, chart.dom_id = fig, f"saved-chart-{chart.id}"
        chart.href = "/explore/chart/?" + urlencode(spec)
        shown.append(chart)
    user = context["request"].user
    return {"charts": shown, "manage": can_manage(user, experiment), "request": context["request"]}
