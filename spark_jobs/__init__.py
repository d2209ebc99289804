"""PySpark aggregations behind the sidecar's decisions."""
