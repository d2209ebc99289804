"""The lab: everything the tests, the benchmarks and the demo start around the sidecar.

Not installed with the sidecar (setup.cfg packages only quota_sidecar and spark_jobs): pytest finds
it through `pythonpath = tests`, the benchmarks and the demo put tests/ on sys.path themselves.

- cluster: real Kafka brokers (KRaft or with a real ZooKeeper) from the Maven-resolved jars, their ports, small
  filesystems for their log dirs, free space as Kafka measures it, Kafka's own command-line tools, TLS and SASL
- clients: the producers and readers the tests run against a cluster, and what they measure of it
- network: brokers in network namespaces behind rate-limited links, and the moves measured across them
- spark: `quota-sidecar aggregate` and a local Spark Connect server, from the installed pyspark
- faults: the fault soak's lab, its nemesis and its invariants
- agents: `quota-sidecar run` as a subprocess, its image and chart, what the replication tests read, the decision
  cases' folders
- docs: the README's quick-start commands as a newcomer copies them, and the site's page generator
- waiting, periodic: bounded waits, and something sampled every few seconds
"""
