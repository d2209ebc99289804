"""Act: what was decided, written to the cluster (quotas, throttles, cordons, disk guard); the snapshot of the pass."""
