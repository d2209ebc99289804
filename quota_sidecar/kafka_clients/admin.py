"""The cluster admin: live brokers, log-dir sizes, client quotas, configs, topics, reassignments.

With cluster_store.py and pipeline/transport.py (records, observations and decisions, through producers and
consumers) and kafka_client.py (how clients are opened and their errors typed), the agent's only Kafka I/O.
Every failure leaves as a typed AdminError (kafka_client.admin_error): retryable or permanent. Built on
kafka-python's admin client; most calls send the protocol requests (admin_requests.py) through its connection
manager (admin_connection.py, which also knows the live brokers). The calls are grouped by what they read and
write: log_dirs.py, client_quotas.py, configs.py, topics.py.
"""

from __future__ import annotations

from .client_quotas import ClientQuotas
from .configs import Configs
from .log_dirs import LogDirs
from .topics import Topics


class ClusterAdmin(LogDirs, ClientQuotas, Configs, Topics):
    """Every admin call on one Kafka cluster, through one connection (admin_connection.AdminConnection: it connects
    on first use and retries within the pass's deadline)."""
