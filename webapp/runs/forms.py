"""The new-experiment form, generated from `trainer.config.field_help()`.

Every config field of docs/design.md §3 that is not a matrix axis is one input, with its default
and its help line; the axes (workflow, task, model, sharing) are checkboxes and the seeds a
comma-separated list. Validation is `trainer.config.expand_matrix`'s, the same code the API
and the CLI use; each error is shown beside its field (`matrix.<axis>` beside the axis).

What is stored (`spec`): the preset, only the field values that differ from what the preset
gives, and the matrix. An axis with nothing checked is left out of the matrix and takes the
preset's (or the default) value, the rule of `trainer.config.matrix_size` that the live run
counter (static/experiment_form.js) follows too.
"""

from __future__ import annotations

from typing import Any

from django import forms

from trainer.config import (
    PAPER_MODELS,
    PRESETS,
    SHARING,
    TASKS,
    TINY_MODELS,
    WORKFLOWS,
    ConfigError,
    expand_matrix,
    field_help,
)
from vocabulary.names import CELL_AXES, MATRIX_AXES
from webapp.runs.queueing import check_models, check_paths, queue_for
from webapp.runs.warm_start import warm_start_note
from webapp.runs.worker_gpus import check_capacity

AXES = CELL_AXES  # the matrix axes ticked as boxes; seeds are typed as a list
AXIS_CHOICES = {
    "workflow": WORKFLOWS,
    "task": TASKS,
    "model": TINY_MODELS + PAPER_MODELS,
    "sharing": SHARING,
}
GROUPS = {
    "run": "Data and device",
    "finetune": "Fine-tuning",
    "rl": "Reinforcement learning",
    "credit": "Credit assignment",
    "workflow": "Workflow knobs",
    "eval": "Evaluation and checkpoints",
}
HYPERPARAMETERS = [row for row in field_help() if row["name"] not in MATRIX_AXES]
MAX_SEEDS = 100
CHECKBOXES = forms.CheckboxSelectMultiple


def as_text(value: Any) -> str:
    """A config value as the form shows it (role maps as `role=value, …`; None as blank)."""
    if value is None:
        return ""
    if isinstance(value, dict):  # an external run's config is whatever its client sent
        return ", ".join(f"{k}={as_text(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def preset_values(preset: str) -> dict[str, Any]:
    """The raw field values a preset starts from (unresolved: max_rounds may stay None)."""
    values = {row["name"]: row["default"] for row in field_help()}
    values.update(PRESETS.get(preset, {}))
    return values


def initial_for(preset: str = "", config: dict | None = None, matrix: dict | None = None) -> dict:
    """Initial form data: a preset's values, overridden by `config`; `matrix` checks boxes."""
    values = {**preset_values(preset), **(config or {})}
    initial: dict[str, Any] = {"preset": preset}
    for row in HYPERPARAMETERS:
        value = values[row["name"]]
        initial[row["name"]] = value if row["type"] == "bool" else as_text(value)
    matrix = matrix or {}
    for axis in AXES:
        chosen = [str(v) for v in matrix.get(axis) or [values[axis]]]
        listed = [v for v in chosen if v in AXIS_CHOICES[axis]]
        initial[axis] = listed
        if axis == "model":
            initial["other_models"] = ", ".join(v for v in chosen if v not in listed)
    initial["seeds"] = ", ".join(str(s) for s in matrix.get("seed") or [values["seed"]])
    return initial


def _help(row: dict) -> str:
    if "(default" in row["help"]:  # e.g. max_rounds: "(default 3 math, 2 code)"
        return f"{row['help']}."
    return f"{row['help']}. Default {as_text(row['default']) or 'none'}."


class ExperimentForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    preset = forms.ChoiceField(
        required=False, choices=[("", "none (defaults)")] + [(p, p) for p in PRESETS]
    )
    workflow = forms.MultipleChoiceField(
        required=False, choices=[(v, v) for v in WORKFLOWS], widget=CHECKBOXES
    )
    task = forms.MultipleChoiceField(
        required=False, choices=[(v, v) for v in TASKS], widget=CHECKBOXES
    )
    model = forms.MultipleChoiceField(
        required=False, choices=[(v, v) for v in AXIS_CHOICES["model"]], widget=CHECKBOXES
    )
    other_models = forms.CharField(
        required=False,
        max_length=1000,
        help_text="Other Hugging Face ids or local model directories, separated by commas.",
    )
    sharing = forms.MultipleChoiceField(
        required=False, choices=[(v, v) for v in SHARING], widget=CHECKBOXES
    )
    seeds = forms.CharField(
        required=False,
        max_length=1000,
        help_text="One run per seed, e.g. 0,1,2.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for row in HYPERPARAMETERS:
            if row["type"] == "bool":
                field = forms.BooleanField(required=False)
            elif row.get("choices"):
                field = forms.ChoiceField(required=False, choices=[(c, c) for c in row["choices"]])
            else:
                field = forms.CharField(required=False, max_length=1000)
            field.help_text = _help(row)
            field.group = row["group"]
            self.fields[row["name"]] = field
        # Before anything is queued: which tiny models a first run must warm-start first.
        self.fields["model"].help_text = warm_start_note(list(TINY_MODELS))
        self.spec: dict[str, Any] = {}
        self.run_count = 0

    def groups(self) -> list[tuple[str, list]]:
        """(title, bound fields) for each group of hyperparameters, in the config's order."""
        grouped: dict[str, list] = {}
        for row in HYPERPARAMETERS:
            grouped.setdefault(row["group"], []).append(self[row["name"]])
        return [(GROUPS.get(group, group), fields) for group, fields in grouped.items()]

    def axes(self) -> list:
        return [self[axis] for axis in AXES]

    def clean_seeds(self) -> list[int]:
        seeds = []
        for part in self.cleaned_data["seeds"].replace(" ", "").split(","):
            if not part:
                continue
            try:
                seed = int(part)
            except ValueError:
                raise forms.ValidationError(
                    f"{part!r} is not a whole number; write seeds like 0,1,2."
                ) from None
            if seed < 0:
                raise forms.ValidationError(f"{seed} must be at least 0.")
            seeds.append(seed)
        if len(seeds) > MAX_SEEDS:
            raise forms.ValidationError(f"At most {MAX_SEEDS} seeds.")
        return seeds

    def clean_other_models(self) -> list[str]:
        return [m.strip() for m in self.cleaned_data["other_models"].split(",") if m.strip()]

    def clean(self) -> dict:
        data = super().clean()
        # The name and description feed no config: check the configs even when those are
        # wrong, so one submit shows every problem.
        if set(self.errors) - {"name", "description"}:
            return data
        preset = data.get("preset") or ""
        values: dict[str, Any] = {}
        for row in HYPERPARAMETERS:
            value = data.get(row["name"])
            if row["type"] == "bool":
                values[row["name"]] = bool(value)
            elif value not in (None, ""):
                values[row["name"]] = value
            elif row["name"] == "max_rounds":
                values["max_rounds"] = None  # blank: 3 for math, 2 for code
        matrix: dict[str, list] = {}
        for axis in AXES:
            chosen = list(data.get(axis) or [])
            if axis == "model":
                chosen += [m for m in data.get("other_models", []) if m not in chosen]
            if chosen:
                matrix[axis] = chosen
        if data.get("seeds"):
            matrix["seed"] = data["seeds"]
        try:
            check_paths(values, matrix)
            configs = expand_matrix(values, matrix, preset or None)
            check_models(configs)
            # GPUs beside world_size, a GPU beside device, memory at the top;
            # create_experiment checks them again
            check_capacity(configs, queue_for)
        except ConfigError as exc:
            self.refuse(exc)
            return data
        self.run_count = len(configs)
        self.spec = {
            "preset": preset,
            "config": self._overrides(values, configs[0], preset),
            "matrix": matrix,
        }
        return data

    def refuse(self, exc: ConfigError) -> None:
        """Show trainer.config's errors beside their fields (the form is then invalid)."""
        for key, message in exc.errors.items():
            self.add_error(self._field_for(key), message)

    def _field_for(self, error_key: str) -> str | None:
        """The form field an error of trainer.config belongs beside (None: the whole form)."""
        name = error_key.removeprefix("matrix.")
        if name == "seed":
            return "seeds"
        if name == "model" and not self.cleaned_data.get("model"):
            return "other_models"
        return name if name in self.fields else None

    @staticmethod
    def _overrides(values: dict[str, Any], config, preset: str) -> dict[str, Any]:
        """The submitted values that differ from the preset's, typed as in a config."""
        base = preset_values(preset)
        typed = config.to_dict()
        changed = {}
        for name, value in values.items():
            if name == "dataset":
                chosen = value.strip()  # "paper" stays "paper": it is resolved per task
            elif name == "max_rounds":
                chosen = None if value is None else int(value)  # None: resolved per task
            else:
                chosen = typed[name]
            if chosen != base[name]:
                changed[name] = chosen
        return changed
