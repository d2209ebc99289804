"""Serve: what people and Prometheus read of a sidecar: status, metrics and the HTTP endpoint."""
