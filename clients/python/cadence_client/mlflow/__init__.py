"""``cadence import mlflow``: read runs from an MLflow tracking server's REST API and
post them to Cadence (``mlflow_api`` talks to MLflow, ``mapping`` turns an MLflow run
into a run record, ``command`` is the CLI)."""
