"""The lab: everything the tests, the benchmarks and the demo start around the sidecar.

Not installed with the sidecar (setup.cfg packages only quota_sidecar and spark_jobs): pytest finds
it through `pythonpath = tests`, the benchmarks and the demo put tests/ on sys.path themselves.

- local_cluster: Kafka brokers (KRaft, loopback) from the Maven-resolved jars; beside it kafka_builds (which
  Kafka), broker_node (one broker's properties and command line), small_filesystem (tmpfs log dirs), exit_cleanup
- connect_server: a local Spark Connect server, for sidecars that share one Spark
- flood: a producer that fills a disk as fast as its quota lets it
- netns, move_lab: brokers in network namespaces behind rate-limited links and moves between them; beside it
  lab_clients and client_load (the client load), move_result (what a move measures)
- ports, waiting, sidecar_process: free ports, bounded waits, `quota-sidecar run` as a subprocess
- replication_checks: what the replication-throttle tests read from the cluster and the sidecars' records
"""
