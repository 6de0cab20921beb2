"""The ``cadence`` subcommands a pipeline or CI job needs: ``report``, ``export``,
``check``, ``report-evaluations`` (and ``import mlflow`` in ``cadence_client.mlflow``)."""
