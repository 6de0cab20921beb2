"""Callbacks that fill a tracked run's stall and checkpoint time from a training
framework's own loop: ``lightning`` (PyTorch Lightning) and ``huggingface`` (the
Transformers ``Trainer``). Each imports its framework, which the client does not
depend on; import the one you use."""
