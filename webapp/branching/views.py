"""Branching a run from the browser and the API: child runs from one of its checkpoints.

- `/runs/<id>/branch/`: the branch form (also shown on the run page, which posts here). A
  valid post queues the children and goes back to the run page; an invalid one shows the form
  again with each error beside its field.
- `POST /api/v1/runs/<id>/branch`: `{"checkpoint": "best" | "latest" | "<name>", "control":
  true, "branches": [{"lr_factor": 0.1}, {"kl_beta_per_role": {"generator": 0.05}}, …]}` →
  201 `{"parent", "checkpoint", "runs": [...]}`; a bad value is 400 naming it (`checkpoint`,
  `branches[1]`, `control`).

Both need the parent's owner or staff; the planning and queueing are `branching.py`'s.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from trainer.config import WORKFLOW_ROLES, ConfigError
from webapp.branching.branch import (
    Kept,
    can_branch,
    kept_checkpoints,
    plan_branches,
    queue_branches,
)
from webapp.experiments.models import Run
from webapp.jsonapi.http import ApiError, api_view, read_json
from webapp.runs.access import get_run_for_user
from webapp.runs.serialize import run_json, run_label

SHARING_HELP = (
    "Sharing mode is not offered: it decides how many policies there are and which roles "
    "train which, and a checkpoint holds exactly that set of policies, so a branch cannot "
    "start from it with another layout. Queue a new experiment to compare sharing modes."
)
TEXT = forms.TextInput(attrs={"autocomplete": "off"})


def checkpoint_label(kept: Kept) -> str:
    accuracy = f", accuracy {kept.accuracy:.3f}" if kept.accuracy is not None else ""
    return f"step {kept.step} · peak{accuracy}" if kept.peak else f"step {kept.step}{accuracy}"


class BranchForm(forms.Form):
    """One child run per change filled in, plus the control continuation when ticked."""

    checkpoint = forms.ChoiceField(widget=forms.RadioSelect, label="checkpoint")
    kl_role = forms.ChoiceField(
        required=False,
        label="kl role",
        help_text="Per-role KL anchor: whose coefficient to the base model changes.",
    )
    kl_value = forms.CharField(
        required=False, widget=TEXT, label="kl value", help_text="The new KL coefficient (≥ 0)."
    )
    coherence_lambda = forms.CharField(
        required=False,
        widget=TEXT,
        label="coherence_lambda",
        help_text="The new coherence regulariser λ (≥ 0).",
    )
    lr_factor = forms.CharField(
        required=False,
        widget=TEXT,
        label="lr factor",
        help_text="Learning-rate cut: lr × this factor (between 0 and 1, e.g. 0.1).",
    )
    control = forms.BooleanField(
        required=False,
        initial=True,
        label="control continuation",
        help_text="Also queue an unchanged child from the same checkpoint, to tell the "
        "change's effect from the continuation's noise.",
    )

    def __init__(self, run: Run, kept: list[Kept], *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.run = run
        self.plan = None
        self.fields["checkpoint"].choices = [(k.name, checkpoint_label(k)) for k in kept]
        if kept:
            self.fields["checkpoint"].initial = kept[0].name  # the peak when there is one
        kl_beta = run.config.get("kl_beta", 0.0)
        roles = WORKFLOW_ROLES.get(run.config.get("workflow"), ())
        self.fields["kl_role"].choices = [("", f"every role (kl_beta, now {kl_beta:g})")] + [
            (role, f"{role} (now {run.config.get('kl_beta_per_role', {}).get(role, kl_beta):g})")
            for role in roles
        ]

    def requests(self) -> list[tuple[str, dict]]:
        """The filled-in changes, each named by the field its errors belong to."""
        data = self.cleaned_data
        wanted = []
        if value := data.get("kl_value", "").strip():
            role = data.get("kl_role") or ""
            wanted.append(
                ("kl_value", {"kl_beta_per_role": {role: value}} if role else {"kl_beta": value})
            )
        if value := data.get("coherence_lambda", "").strip():
            wanted.append(("coherence_lambda", {"coherence_lambda": value}))
        if value := data.get("lr_factor", "").strip():
            wanted.append(("lr_factor", {"lr_factor": value}))
        return wanted

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            self.plan = plan_branches(
                self.run, data["checkpoint"], self.requests(), data.get("control", False)
            )
        except ConfigError as exc:
            for name, message in exc.errors.items():
                self.add_error(name if name in self.fields else None, message)
        return data


@login_required
def run_branch(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, manage=True)
    if not can_branch(run):
        messages.error(request, "Only runs trained here have checkpoints to branch from.")
        return redirect("run_detail", run.id)
    kept = kept_checkpoints(run)
    if request.method == "POST":
        form = BranchForm(run, kept, request.POST)
        if form.is_valid() and (children := _queue(form)) is not None:
            names = ", ".join(f"#{child.id}" for child in children)
            count = len(children)
            messages.success(
                request,
                f"Queued {count} branch{'es' if count != 1 else ''} from step "
                f"{form.plan.checkpoint.step}: run{'s' if count != 1 else ''} {names}.",
            )
            return redirect("run_detail", run.id)
    else:
        form = BranchForm(run, kept)
    context = {
        "run": run,
        "label": run_label(run),
        "experiment": run.experiment,
        "form": form,
        "kept": kept,
        "sharing_help": SHARING_HELP,
    }
    return render(request, "branching/branch.html", context)


def _queue(form: BranchForm) -> list[Run] | None:
    """The children queued, or None with the form's error when the checkpoint vanished."""
    try:
        return queue_branches(form.plan)
    except ConfigError as exc:
        for name, message in exc.errors.items():
            form.add_error(name if name in form.fields else None, message)
        return None


def _bool(data: dict, name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise ApiError(400, "Invalid branch.", {name: "true or false"})
    return value


@api_view("POST")
def branch_api(request: HttpRequest, run_id: int) -> JsonResponse:
    run = get_run_for_user(request.user, run_id, manage=True)
    if not can_branch(run):
        raise ApiError(409, f"Run {run_id} is external: it has no checkpoints to branch from.")
    data = read_json(request)
    checkpoint = data.get("checkpoint", "best")
    if not isinstance(checkpoint, str) or not checkpoint:
        raise ApiError(400, "Invalid branch.", {"checkpoint": "best, latest or a checkpoint name"})
    branches = data.get("branches", [])
    if not isinstance(branches, list):
        raise ApiError(400, "Invalid branch.", {"branches": "a list of changes, one a child"})
    control = _bool(data, "control", True)
    requests = [(f"branches[{i}]", change) for i, change in enumerate(branches)]
    try:
        plan = plan_branches(run, checkpoint, requests, control)
    except ConfigError as exc:
        raise ApiError(400, "Invalid branch: nothing was queued.", exc.errors) from None
    try:
        children = queue_branches(plan)
    except ConfigError as exc:
        raise ApiError(409, "The checkpoint is gone: nothing was queued.", exc.errors) from None
    return JsonResponse(
        {
            "parent": run.id,
            "checkpoint": plan.checkpoint.json(),
            "runs": [run_json(child, detail=True, viewer=request.user) for child in children],
        },
        status=201,
    )
