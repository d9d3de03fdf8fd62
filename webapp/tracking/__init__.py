"""Troupe as an MLflow tracking server: the REST subset that MLflow clients log through
(`/api/2.0/mlflow/`), and the offline importer of TensorBoard and verl JSONL logs."""
