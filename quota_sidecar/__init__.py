"""quota-sidecar: keeps a Kafka cluster safe while clients and data movements compete for disk and network."""

__version__ = "0.1.0"
