"""Template tags of the run page's lineage: its parent, its branches and what each changed.

- `{% lineage_line run %}`: under the title of a branch, "Branched from run #12 at step 4:
  lr 0.01 → 0.001", linking the parent.
- `{% lineage_panel %}`: the run's branches (linked, with their change and status), a link to
  the compare view's lineage mode, and for its owner the branch form.

Tags rather than view code, so that the run view stays as it is.
"""

from __future__ import annotations

from django import template

from vocabulary.names import ACCURACY_KEY
from webapp.branching.branch import can_branch, kept_checkpoints
from webapp.branching.views import SHARING_HELP, BranchForm
from webapp.dashboards.state import PREFIX
from webapp.runs.access import can_manage
from webapp.runs.lineage import change_text, children_of, is_branch

register = template.Library()


def compare_lineage_url(run_id: int) -> str:
    return f"{PREFIX}/compare?run={run_id}&lineage=1&key={ACCURACY_KEY}"


@register.inclusion_tag("branching/_lineage_line.html")
def lineage_line(run) -> dict:
    if not is_branch(run):
        return {"show": False}
    parent = run.parent
    return {
        "show": True,
        "run": run,
        "parent": parent,
        "change": change_text(run.intervention, parent.config if parent else {}),
        "compare_url": compare_lineage_url(run.id),
    }


@register.inclusion_tag("branching/_lineage.html", takes_context=True)
def lineage_panel(context) -> dict:
    run = context["run"]
    request = context["request"]
    children = children_of(run)
    manage = can_manage(request.user, run.experiment) and can_branch(run)
    kept = kept_checkpoints(run) if manage else []
    if not children and not manage:
        return {"show": False}
    for child in children:
        child.change = change_text(child.intervention, run.config)
    return {
        "show": True,
        "run": run,
        "children": children,
        "manage": manage,
        "kept": kept,
        "form": BranchForm(run, kept) if kept else None,
        "sharing_help": SHARING_HELP,
        "compare_url": compare_lineage_url(run.id),
        "csrf_token": context.get("csrf_token"),
    }
