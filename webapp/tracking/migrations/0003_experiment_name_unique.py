"""The unique (owner, name) of MLflow experiments, in its own migration: PostgreSQL refuses
to alter a table in the transaction that just updated its rows under a deferred foreign key."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tracking", "0002_experiment_name_claim")]

    operations = [
        migrations.AddConstraint(
            model_name="trackedexperiment",
            constraint=models.UniqueConstraint(
                fields=("owner", "name"), name="mlflow_name_unique_per_owner"
            ),
        ),
    ]
