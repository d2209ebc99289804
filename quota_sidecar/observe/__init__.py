"""Observe: the cluster (through the Kafka admin client, ZooKeeper) and this host (log dirs, network) read into
observations."""
