"""The agent's Kafka clients: how kafka-python's clients are opened and their failures typed (kafka_client.py), and
the admin client of a cluster (admin.py), which the pipeline, the observations and the writes all use."""
