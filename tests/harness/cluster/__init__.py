"""Real Kafka clusters on this machine: brokers, controllers, ZooKeeper, ports, small filesystems, Kafka's tools."""
