"""Metric keys of up to 250 characters and steps of any 64-bit integer, as MLflow takes
them; alerts read from such keys and steps fit too."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0007_workerseen"),
    ]

    operations = [
        migrations.AlterField(
            model_name="alert",
            name="key",
            field=models.CharField(max_length=250),
        ),
        migrations.AlterField(
            model_name="alert",
            name="seen_at",
            field=models.BigIntegerField(),
        ),
        migrations.AlterField(
            model_name="alert",
            name="step",
            field=models.BigIntegerField(),
        ),
        migrations.AlterField(
            model_name="metricpoint",
            name="key",
            field=models.CharField(max_length=250),
        ),
        migrations.AlterField(
            model_name="metricpoint",
            name="step",
            field=models.BigIntegerField(),
        ),
    ]
