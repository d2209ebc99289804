"""Decide: observations and configuration in, decisions out: quotas, throttle factor, replication throttles, cordons."""
