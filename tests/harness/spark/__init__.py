"""The aggregator and a Spark Connect server, started from the installed pyspark."""
