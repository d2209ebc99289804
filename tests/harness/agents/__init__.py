"""The project's own processes as an operator runs them: the sidecar, its image and chart, the decision cases."""
