"""A broker cut off from the sidecar in the middle of its work (issue 19's soak: a broker's link down).

Each broker runs in a network namespace of its own (harness/netns.py) beside three KRaft controllers alone. A link
taken down sends no reset: the sidecar's connection to that broker looks alive. A quota the sidecar sent there
waited out request.timeout.ms (30 s) and then failed, 1 write in 6, while a full-speed flood onto another broker
filled its disk in a second; the soak's half hour lost broker 3's log dir so.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from harness.kafka_tools import active_controller
from harness.netns import TestNetwork, unavailable_reason
from harness.waiting import eventually
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.observe.admin import ClusterAdmin

pytestmark = [pytest.mark.integration, pytest.mark.netns]
BROKERS = (1, 2, 3)


@pytest.fixture
def cut_off_lab(make_kafka_cluster):
    if (why := unavailable_reason()) is not None:
        pytest.fail(f"network namespaces: {why}")
    with TestNetwork(BROKERS, 1 << 30, subnet=21) as network:
        cluster = make_kafka_cluster(
            brokers=len(BROKERS), network_namespaces={b: (network.namespace(b), network.ip(b)) for b in BROKERS},
            controllers=3, controller_host=network.bridge_ip)
        yield network, cluster
        cluster.stop()  # inside the namespaces' life


def test_a_quota_write_is_answered_within_seconds_while_a_broker_is_cut_off(cut_off_lab):
    network, cluster = cut_off_lab
    assert active_controller(cluster.bootstrap_servers) in cluster.controller_ids
    with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        admin.describe_volumes(BROKERS, datetime.now(timezone.utc))  # a connection to every broker
        network.cut(1)
        try:
            took = []
            for rate in range(1, 13):  # each write goes to the broker with no request in flight: broker 1 too
                started = time.monotonic()
                admin.alter_user_quotas({None: {PRODUCE: float(rate)}})
                took.append(time.monotonic() - started)
            assert eventually(lambda: admin.describe_user_quotas([None])[None][PRODUCE] == 12.0, timeout=10)
        finally:
            network.heal(1)
            admin.alter_user_quotas({None: {PRODUCE: None}})
    print("quota writes with broker 1 cut off: " + ", ".join(f"{seconds:.2f}" for seconds in took) + " s")
    assert max(took) < 5.0, took
