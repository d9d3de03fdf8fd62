"""Celery app and tasks: the glue between the database and the trainer."""
