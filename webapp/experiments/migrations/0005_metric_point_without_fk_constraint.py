"""Metric points keep no foreign-key constraint on their run in the database (see the model)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0004_run_lineage"),
    ]

    operations = [
        migrations.AlterField(
            model_name="metricpoint",
            name="run",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="points",
                to="experiments.run",
            ),
        ),
    ]
