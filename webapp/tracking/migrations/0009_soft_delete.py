"""MLflow's soft delete: when a run or an experiment was put in the "deleted" stage."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0008_every_point_and_wider_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="trackedexperiment",
            name="deleted_time",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="trackedrun",
            name="deleted_time",
            field=models.BigIntegerField(blank=True, null=True),
        ),
    ]
