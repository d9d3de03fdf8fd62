"""MLflow 3 logged models, kept with the run that made them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0005_metric_point_without_fk_constraint"),
        ("tracking", "0005_point_time"),
    ]

    operations = [
        migrations.CreateModel(
            name="LoggedModel",
            fields=[
                ("model_id", models.CharField(max_length=40, primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=250)),
                ("model_type", models.CharField(blank=True, max_length=500)),
                ("status", models.CharField(default="LOGGED_MODEL_PENDING", max_length=40)),
                ("created", models.BigIntegerField()),
                ("updated", models.BigIntegerField()),
                ("tags", models.JSONField(default=dict)),
                ("params", models.JSONField(default=dict)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="experiments.run",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["run", "name"], name="logged_model_run_name")],
            },
        ),
    ]
