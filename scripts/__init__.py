"""Developer and CI scripts (importable from the repository root: ``python -m scripts.local_servers``)."""
