"""Every point an MLflow client logs (`EarlierPoint`), the Troupe keys a client logs itself
(`TrackedRun.shadowed`), a run's model outputs and a model's metrics, and MLflow's key and
step ranges for the time and sign rows."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0008_mlflow_steps_and_keys"),
        ("tracking", "0007_point_sign"),
    ]

    operations = [
        migrations.AddField(
            model_name="loggedmodel",
            name="metrics",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="trackedrun",
            name="outputs",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="trackedrun",
            name="shadowed",
            field=models.JSONField(default=dict),
        ),
        migrations.AlterField(
            model_name="pointsign",
            name="key",
            field=models.CharField(max_length=250),
        ),
        migrations.AlterField(
            model_name="pointsign",
            name="step",
            field=models.BigIntegerField(),
        ),
        migrations.AlterField(
            model_name="pointtime",
            name="key",
            field=models.CharField(max_length=250),
        ),
        migrations.AlterField(
            model_name="pointtime",
            name="step",
            field=models.BigIntegerField(),
        ),
        migrations.AlterField(
            model_name="steptime",
            name="step",
            field=models.BigIntegerField(),
        ),
        migrations.AlterField(
            model_name="trackedrun",
            name="accuracy_key",
            field=models.CharField(blank=True, max_length=250),
        ),
        migrations.CreateModel(
            name="EarlierPoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=250)),
                ("step", models.BigIntegerField()),
                ("timestamp", models.BigIntegerField()),
                ("value", models.FloatField()),
                ("gap", models.SmallIntegerField(default=0)),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="experiments.run",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "key", "step", "timestamp", "value", "gap"),
                        name="earlier_point_once",
                    )
                ],
            },
        ),
    ]
