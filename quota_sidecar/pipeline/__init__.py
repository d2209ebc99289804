"""The wire between the agents and the aggregator: the messages (messages.py) and their fields (schema.py), which
both ends read, the topics (topics.py), the Kafka clients that carry them (transport.py), and the agents'
heartbeats to each other (heartbeats.py)."""
