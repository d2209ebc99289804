"""The wire between the agents and the aggregator: the messages (messages.py) and their fields (schema.py), which
both ends read, the topics (topics.py), and the Kafka clients that carry them (transport.py)."""
