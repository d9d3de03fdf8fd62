"""Experiment names as MLflow sees them: an owner's name leads to one experiment.

MLflow's `experiments/create` and `get-by-name` (`store.py`) claim and look a name up through
`TrackedExperiment`'s unique (owner, name) row. An experiment made on Troupe's own pages or
API claims its name through the same row, in the transaction that makes it, so the database
decides a race between the two paths as it decides one between two MLflow clients: the first
insert holds the name, and MLflow's create that loses answers RESOURCE_ALREADY_EXISTS (the
client's `set_experiment` then uses the holder). Troupe's pages still allow an owner two
experiments of one name (a re-queued sweep); the later one simply holds no MLflow name, so
MLflow clients keep finding the first.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from webapp.experiments.models import Experiment, TrackedExperiment

DEFAULT_NAME = "Default"  # each owner's MLflow experiment "0" holds it (store.py)


def claim_name(experiment: Experiment) -> bool:
    """Give a newly made experiment its owner's MLflow name when no other holds it; whether
    it got it. Run inside the transaction that makes the experiment."""
    if experiment.name != DEFAULT_NAME:
        try:
            with transaction.atomic():  # a savepoint: losing leaves the caller's usable
                TrackedExperiment.objects.create(
                    experiment=experiment, owner=experiment.owner, name=experiment.name
                )
            return True
        except IntegrityError:
            pass  # held by another experiment of the owner's, or just taken by a racer
    TrackedExperiment.objects.create(experiment=experiment, owner=experiment.owner, name=None)
    return False
