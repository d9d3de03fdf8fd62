"""The tables of points' times, signs and earlier values go to the metric store's app.

Django's state only (see `webapp/metrics/migrations/0001_initial.py`): the tables stay, under
their names, and are the metrics app's from here on.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0010_trackedrun_cut"),
        ("metrics", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="EarlierPoint"),
                migrations.DeleteModel(name="PointSign"),
                migrations.DeleteModel(name="PointTime"),
                migrations.DeleteModel(name="StepTime"),
            ],
        ),
    ]
