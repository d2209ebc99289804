"""Replication throttles end to end; a package, so that its conftest.py can share one cluster per generation."""
