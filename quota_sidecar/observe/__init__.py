"""Observe: the cluster (Kafka admin I/O, ZooKeeper) and this host (log dirs, network) read into observations."""
