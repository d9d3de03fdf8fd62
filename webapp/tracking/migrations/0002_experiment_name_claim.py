"""Each MLflow experiment claims its name among its owner's: the columns, filled
from the experiments. Where earlier check-then-insert races made two experiments of one name,
the oldest keeps the claim and the others keep none (they stay readable by id)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def claim_names(apps, schema_editor):
    TrackedExperiment = apps.get_model("tracking", "TrackedExperiment")
    claimed = set()
    for tracked in TrackedExperiment.objects.select_related("experiment").order_by("experiment_id"):
        experiment = tracked.experiment
        key = (experiment.owner_id, experiment.name)
        tracked.owner_id = experiment.owner_id
        tracked.name = None if key in claimed else experiment.name
        claimed.add(key)
        tracked.save(update_fields=["owner", "name"])


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="trackedexperiment",
            name="owner",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="trackedexperiment",
            name="name",
            field=models.CharField(max_length=200, null=True),
        ),
        migrations.RunPython(claim_names, migrations.RunPython.noop),
    ]
