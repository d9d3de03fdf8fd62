"""The charts saved on an experiment, drawn for its page (`charts.py` draws each); the
`saved_charts` template tag only renders what this builds."""

from __future__ import annotations

from urllib.parse import urlencode

from webapp.explorer import charts
from webapp.explorer.fields import ExplorerError
from webapp.explorer.models import SavedChart
from webapp.runs.access import can_manage


def saved_charts(request, experiment) -> dict:
    """The charts saved on `experiment`, each drawn, for its page; a chart naming a field the
    explorer no longer reads is left out."""
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
    return {"charts": shown, "manage": can_manage(request.user, experiment), "request": request}
