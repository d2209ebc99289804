"""Every producer is throttled, also a principal with a quota of its own (a tenant).

Kafka applies, per key, the most specific quota entity that sets it, so a producer whose principal has a
producer_byte_rate of its own never feels the default user's. Three tenants flood broker 3's small log dir at
once with Kafka's own Java producer over SASL, their quotas set with kafka-configs as an operator (or
Strimzi's User Operator) sets them: alice with a user quota, bob with a user + client-id quota, carol through
the client id carol-app, which has a quota for every user. The sidecar beside broker 3 checks every 15 s
(the floods cross the margin between two passes): its local watch's verdict must throttle each tenant's own
entity, and the filesystem never fills. `ops`, an excluded principal with a quota of its own, is left as it is.

A tenant whose quota is created during the throttle (dave) is throttled at the next pass. When the disk has
room again each tenant gets its own rate back, except bob, whose quota an operator raised during the
throttle: it stays the operator's.
"""

from __future__ import annotations

import re
import signal
import time
from datetime import datetime, timezone

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from harness.cluster.disk import DiskSampler
from harness.cluster.kafka_tools import kafka_configs, producer_performance
from harness.agents.sidecar_process import SidecarProcess
from harness.waiting import eventually
from quota_sidecar.act.cluster_store import ClusterStore
from quota_sidecar.common import records
from quota_sidecar.configuration.keys import KEYS_BY_NAME
from quota_sidecar.configuration.properties import PREFIX, SIDECAR_CLIENT_ID
from quota_sidecar.decide.quotas import PRODUCE, entity_label
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = pytest.mark.integration
MiB = 1 << 20
LIMIT = 256 * MiB
FILESYSTEM = LIMIT + 160 * MiB  # a margin three full-speed Java producers cross in a second or two
RECORD = 16 << 10
FLOOD = {"acks": "all", "linger.ms": 5, "batch.size": 256 << 10, "max.in.flight.requests.per.connection": 5,
         "compression.type": "none", "delivery.timeout.ms": 30000, "request.timeout.ms": 20000}
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
         "ops": "ops-secret"}
OWN_RATE, OPS_RATE, RAISED = 1_000_000_000, 123_456, 2_000_000_000
DAVE = ["--entity-type", "users", "--entity-name", "dave"]
# principal -> (client id, the entity whose producer rate applies to it, kafka-configs' words for that entity)
TENANTS = {
    "alice": ("alice-app", "alice", ["--entity-type", "users", "--entity-name", "alice"]),
    "bob": ("bob-app", ("bob", "bob-app"),
            ["--entity-type", "users", "--entity-name", "bob", "--entity-type", "clients", "--entity-name", "bob-app"]),
    "carol": ("carol-app", (None, "carol-app"),
              ["--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-name", "carol-app"]),
}
OPS = ["--entity-type", "users", "--entity-name", "ops"]
# Once the floods stop, a volume still above its hard limit holds its tenants at the descent's floor, not at 1 B/s.
FLOOR = KEYS_BY_NAME["produce.floor"].default


@pytest.fixture
def tenants_cluster(make_kafka_cluster, unique_name):
    cluster = make_kafka_cluster(users=USERS, small_log_dirs={(3, 0): FILESYSTEM},
                                 broker_properties={"log.segment.bytes": str(32 * MiB), "log.segment.delete.delay.ms": "1000"})
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(unique_name, replica_assignments={0: [3]})])
    for _, _, entity in TENANTS.values():
        kafka_configs(cluster.bootstrap_servers, "--alter", *entity, "--add-config", f"producer_byte_rate={OWN_RATE}")
    kafka_configs(cluster.bootstrap_servers, "--alter", *OPS, "--add-config", f"producer_byte_rate={OPS_RATE}")
    return cluster, cluster.log_dirs(3)[0], unique_name


def test_every_tenant_is_throttled_by_its_own_entity_and_gets_its_rate_back(tenants_cluster, pipeline, tmp_path):
    cluster, small_dir, topic = tenants_cluster
    sidecar = SidecarProcess("sidecar-3", tmp_path, {
        "node.id": 3, PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.local.log.dirs": small_dir, PREFIX + "storage.per.volume.limit.min.available.bytes": LIMIT,
        PREFIX + "produce": 1 << 30, PREFIX + "excluded.principal.name.list": "User:ops",
        PREFIX + "storage.check.interval": "PT15S", **pipeline})
    with sidecar, ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        sidecar.wait_ready()
        with DiskSampler(small_dir, every=0.01) as free:
            started = time.monotonic()
            producers = [tenant_flood(cluster, topic, user, tmp_path) for user in TENANTS]
            try:
                # from its own rate, or from a step of the descent on the way
                throttled = [sidecar.wait_for_line(rf"quota {re.escape(entity_label(entity))} producer_byte_rate: "
                                                   r"\d+ -> 1$", timeout=120, after=started)
                             for _, entity, _ in TENANTS.values()]
                time.sleep(5)  # what is still in flight lands, or not
            finally:
                for producer in producers:
                    producer.send_signal(signal.SIGTERM)
                for producer in producers:
                    producer.wait(30)
        crossed = free.crossed_at(LIMIT)
        print(("limit never crossed" if crossed is None else f"limit crossed {crossed - started:.2f} s after the "
               f"floods began, tenants throttled {max(line.at for line in throttled) - crossed:+.2f} s from it")
              + f"; lowest free {free.lowest() / MiB:.1f} MiB")
        assert free.lowest() > 0, "the filesystem filled up"
        [volume] = [v for v in admin.describe_volumes([3], datetime.now(timezone.utc)) if v.log_dir == small_dir]
        assert volume.error is None, f"the log dir went offline: {volume.error}"
        entities = [entity for _, entity, _ in TENANTS.values()]
        *tenant_rates, ops_rate = producer_rates(admin, [*entities, "ops"])
        assert all(rate is not None and rate <= FLOOR for rate in tenant_rates), tenant_rates
        assert ops_rate == OPS_RATE
        eventually(lambda: sidecar.status()["tenants"] == {"with_a_rate_of_their_own": 3, "throttled": 3}, 20)
        assert recorded_tenants(cluster) == sorted(map(str, entities)), "the sidecar's own records were not written"

        # A new tenant during the throttle; an operator raises bob's quota; then the disk gets room again.
        created = time.monotonic()
        kafka_configs(cluster.bootstrap_servers, "--alter", *DAVE, "--add-config", f"producer_byte_rate={OWN_RATE}")
        dave = sidecar.wait_for_line(rf"quota User:dave producer_byte_rate: {OWN_RATE} -> \d+$", timeout=60,
                                     after=created)
        # the hard limit's 1 B/s, the floor, or a step of the descent: a third of the broker's fill (its growth over
        # Kafka's window may hold the floods' last seconds)
        assert int(dave.text.rsplit(" ", 1)[1]) < OWN_RATE / 3, dave.text
        kafka_configs(cluster.bootstrap_servers, "--alter", *TENANTS["bob"][2],
                      "--add-config", f"producer_byte_rate={RAISED}")
        deleted = time.monotonic()
        with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as client:
            client.delete_topics([topic])
        # straight back, or through the descent's floor while the volume still fills near its limit
        sidecar.wait_for_line(rf"quota {re.escape(entity_label('alice'))} producer_byte_rate: \d+ -> {OWN_RATE}$",
                              timeout=90, after=deleted)
        eventually(lambda: producer_rates(admin, [*entities, "dave", "ops"])
                   == [OWN_RATE, RAISED, OWN_RATE, OWN_RATE, OPS_RATE], 10)
        assert sidecar.first_line(rf"{re.escape(entity_label(('bob', 'bob-app')))} producer_byte_rate: "
                                  rf"{RAISED} in force, changed by someone else", after=deleted) is not None
        eventually(lambda: recorded_tenants(cluster) == [], 10)  # forgotten once handed back


def tenant_flood(cluster, topic: str, user: str, work_dir):
    client_id = TENANTS[user][0]
    login = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" '
             f'password="{USERS[user]}";')
    return producer_performance(cluster.sasl_bootstrap_servers, topic, 2 * FILESYSTEM // RECORD, RECORD, -1,
                                work_dir / f"producer-{user}.log", **FLOOD, **{
                                    "client.id": client_id, "security.protocol": "SASL_PLAINTEXT",
                                    "sasl.mechanism": "PLAIN", "sasl.jaas.config": login})


def producer_rates(admin: ClusterAdmin, entities) -> list[float | None]:
    in_force = admin.describe_user_quotas(entities)
    return [in_force[entity].get(PRODUCE) for entity in entities]


def recorded_tenants(cluster) -> list[str]:
    """The tenant entities the sidecars' records hold a producer rate of (the sidecar's own entities left out)."""
    with ClusterStore({"bootstrap_servers": cluster.bootstrap_servers.split(",")}) as store:
        owned = records.owned(records.parse(store.read_all()), records.QUOTA)
    return sorted(str(entity) for entity, key in owned
                  if key == PRODUCE and entity not in (None, (None, SIDECAR_CLIENT_ID)))
