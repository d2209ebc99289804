"""What LocalKafkaCluster (local_cluster.py) refuses before it lays anything out: one line naming the argument."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

_USER_NAME = re.compile(r"[A-Za-z0-9._-]+")


def check_arguments(broker_ids: Sequence[int], controller_ids: Sequence[int], log_dir_counts: Mapping[int, int],
                    small_log_dirs: Mapping[tuple[int, int], int], network_namespaces: Mapping[int, tuple[str, str]],
                    users: Mapping[str, str], security: bool, zookeeper: bool) -> None:
    """ValueError for a cluster that cannot be made as asked."""
    if not broker_ids or (security and zookeeper):
        raise ValueError("brokers must be at least 1; security is for KRaft clusters (StandardAuthorizer)")
    if controller_ids and (zookeeper or security):
        raise ValueError("controllers alone are for KRaft clusters without security")
    for broker_id, count in log_dir_counts.items():
        if broker_id not in broker_ids or count < 1:
            raise ValueError(f"log_dirs: broker {broker_id} with {count} dirs; brokers are {list(broker_ids)}, "
                             "1 dir or more")
    for (broker_id, index), size in small_log_dirs.items():
        if not 0 <= index < log_dir_counts.get(broker_id, 0) or size <= 0:
            raise ValueError(f"small_log_dirs: no log dir {index} on broker {broker_id}, or size {size} not positive")
    for broker_id, (namespace, ip) in network_namespaces.items():
        if broker_id not in broker_ids or not namespace or not ip:
            raise ValueError(f"network_namespaces: broker {broker_id} -> ({namespace!r}, {ip!r}); "
                             f"brokers are {list(broker_ids)}, each with a namespace name and an address")
    for user, password in users.items():
        # Both end up inside a quoted JAAS option; keep them free of anything needing escapes.
        if not _USER_NAME.fullmatch(user) or re.search(r'["\\\n]', password):
            raise ValueError(f"users: {user!r} must match {_USER_NAME.pattern}, its password hold no quote, "
                             "backslash or newline")
