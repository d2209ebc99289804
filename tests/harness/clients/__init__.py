"""The clients the tests run against the cluster, and what they measure of it."""
