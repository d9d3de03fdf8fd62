"""The rows beside an experiment and a run go to the experiments app, with the models every
app builds on. Django's state only (see `webapp/experiments/migrations/0011_…`): the tables
stay, under their names.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0011_point_tables_to_the_metric_store"),
        ("experiments", "0012_tracked_rows_from_the_tracking_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="TrackedExperiment"),
                migrations.DeleteModel(name="TrackedRun"),
            ],
        ),
    ]
