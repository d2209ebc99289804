"""KIP-73's test plan for moves you can watch, predict and unstick, on real rate-limited links.

One lab (tests/harness/network/move_lab.py) for the module: brokers 1, 2, 3 each in a network namespace behind a
6 MB/s link, a sidecar beside each, and a steady client load on the source broker: Kafka's producer writing
0.8 MB/s into `client-load`, one reader tailing it and one re-reading its history at 1.6 MB/s.

- (a)+(f): a partition with no produce moves under an operator's global throttle (the sidecars' override);
  it starts with `kafka-reassign-partitions --throttle` at the same rate, which the sidecars take over at
  their first pass; it runs at the throttle (Kafka's 0.5-1.1x band), they report its catch-up rate, and the
  ETA they report 20 s into the move is within +-25 % of the time it then took.
- (b): a partition a producer writes into (`move-inbound`, 0.5 MB/s) moves under a 1.5 MB/s throttle: the
  destination closes the gap at throttle - inbound, as KIP-73's plan says (its replication within the band).
- (c): one partition of broker 1 moves to brokers 2 and 3 at once. Kafka's rates are per broker, over all
  its throttled replicas (ReplicationQuotasTest); broker 2's override is twice the global one that broker 3
  runs under and the source's covers both: each destination runs at its own follower rate (the band), and
  broker 2's replica is reported caught up while broker 3's still moves (the move ends when both are).
- (d): a partition of broker 1 and one of broker 2 move to broker 3: its follower rate bounds their sum.
- (e): the `client-load` partition itself moves, under an operator's `--throttle` below what the producer
  writes into it (0.3 MB/s against 0.8 MB/s). The sidecars are told the links carry 3 MB/s; the readers
  leave the source so little of that that the rule's leader rate is below the partition's incoming rate:
  the move is reported stuck (cannot_keep_up), the source's rate is raised to the keep_up floor, and the
  move ends.

Rates are measured from the replicas' sizes (DescribeLogDirs) while the rates in force are the expected ones,
as read back from the brokers (kafka-reassign-partitions --throttle holds until the sidecars' first pass).
"""

import re
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from harness.cluster import kafka_tools
from harness.clients.lab_clients import RECORD_BYTES, LoadProfile, producer_performance
from harness.network.move_lab import DESTINATION, SOURCE, LabSettings, MoveLab
from harness.network.netns import unavailable_reason
from harness.agents.sidecar_process import http
from harness.waiting import eventually
from quota_sidecar.decide.throttles import FOLLOWER_RATE, LEADER_RATE

pytestmark = [pytest.mark.integration, pytest.mark.netns]

TOKEN = "moves-test-token"
PRODUCE = 800_000
SETTINGS = LabSettings(
    capacity=6_000_000,
    sidecar_capacity=3_000_000,
    # Steady: the replaying reader's "peak" lasts an hour.
    load=LoadProfile(produce=PRODUCE, replay=1_600_000, peak_seconds=3600, quiet_seconds=1),
    move_bytes=48 << 20,  # at OVERRIDE, 50 s: an ETA reported at ETA_AT for 30 s more
    load_history_bytes=16 << 20,
    load_retention_bytes=32 << 20,  # what (e) moves: it catches up at the keep_up floor less the producer's rate
    moves=("eta", "inbound", "spread", "gather-1", "gather-2"),
    move_sizes=(("inbound", 16 << 20), ("spread", 24 << 20), ("gather-1", 24 << 20), ("gather-2", 24 << 20)),
    move_sources=(("gather-2", 2),),
    max_percent=90.0,
    network_window_seconds=8,  # the rates an ETA divides by: Kafka's quota makes replication bursty
    check_interval_seconds=1,
    subnet=3,
    move_timeout=240.0,
    # A pass may wait long for the shared Spark Connect server on a loaded machine: a late pass, not a failed one.
    # The test sets overrides from outside the sidecars' namespaces, over plain HTTP.
    sidecar_properties=(("api.token", TOKEN), ("http.plain.changes", "true"), ("replication.keep.up.margin.percent", 100),
                        ("poll.timeout", "PT60S")),
)
OVERRIDE = 1_000_000
RATE_LOWER, RATE_UPPER = 0.5, 1.1  # Kafka's ReplicationQuotasTest band
ETA_AT, ETA_TOLERANCE = 20.0, 0.25
INBOUND, INBOUND_THROTTLE = 500_000, 1_500_000  # (b)
SPREAD_SOURCE, SPREAD_FAST, SPREAD_GLOBAL = 2_800_000, 1_600_000, 800_000  # (c): brokers 1, 2 and 3
GATHER = 1_600_000  # (d)


@pytest.fixture(scope="module")
def lab():
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no rate-limited network namespaces on this machine: {reason}")
    with MoveLab(SETTINGS) as lab:  # its own temporary dir, kept for the logs
        lab.start_sidecars()
        yield lab


def progress(lab, topic, broker=SOURCE) -> dict | None:
    """The moving replica of topic-0 as a sidecar's /status shows it, with `age`: seconds since the pass
    that decided it (a pass may take seconds on a loaded machine)."""
    status = lab.sidecar_get(broker, "/status") or {}
    moves = status.get("replication", {}).get("progress", [])
    found = next((m for m in moves if m["topic"] == topic and m["partition"] == 0), None)
    if found is None or not status["throttle"]["last_poll"]:
        return None
    decided = datetime.fromisoformat(status["throttle"]["last_poll"].replace("Z", "+00:00"))
    return {**found, "age": (datetime.now(timezone.utc) - decided).total_seconds()}


def moving(lab, *topics) -> bool:
    return any(move.topic in topics for move in lab.admin.list_reassignments())


def execute(lab, targets, throttle):
    """kafka-reassign-partitions --execute --throttle: its rates hold until the sidecars' first pass."""
    done = kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, targets, "--execute",
                                           "--throttle", str(throttle))
    assert done.returncode == 0, done.stdout + done.stderr


def verify(lab, targets):
    """kafka-reassign-partitions --verify: what removes its throttles once the move is done."""
    kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, targets, "--verify")


def to_destination(*topics) -> dict:
    return {(topic, 0): [DESTINATION] for topic in topics}


@contextmanager
def overrides(lab, global_rate, broker_rates=()):
    """The sidecars' global override (unless None) and (broker, rate) overrides, for the length of a move."""
    url = lab.sidecars[SOURCE].url + "/throttle"
    urls = [(url, global_rate)] if global_rate else []
    urls += [(f"{url}/{broker}", rate) for broker, rate in broker_rates]
    try:
        for target, rate in urls:
            code, answer = http("PUT", target, {"rate": rate}, token=TOKEN)
            assert code == 200, answer
        yield
    finally:
        for target, _ in urls:
            http("DELETE", target, token=TOKEN)


def rate_in_force(lab, broker, key) -> int | None:
    value = lab.admin.describe_configs("broker", [broker], [key]).get(str(broker), {}).get(key)
    return None if value is None else int(value)


@dataclass
class Reading:
    at: float                                 # seconds since the moves started
    sizes: dict[tuple[str, int], int]         # (topic, broker): bytes of its replica of partition 0, 0 if none
    rates: dict[tuple[int, str], int | None]  # (broker, key): the rate in force

    def behind(self, topic, leader, broker) -> int:
        return self.sizes[(topic, leader)] - self.sizes[(topic, broker)]


def follow(lab, topics, brokers, rates, reporter) -> tuple[list[Reading], list[dict]]:
    """Every 0.5 s until the moves of topics end: a Reading of brokers and rates ((broker, key)), and every
    moving replica of topics the reporter's sidecar shows, in the order seen."""
    started, readings, reported = time.monotonic(), [], []
    while moving(lab, *topics):
        at = time.monotonic() - started
        assert at < SETTINGS.move_timeout, f"the moves of {topics} did not end; see {lab.work_dir}\n{lab.logs()}"
        sizes = {}
        for broker in brokers:
            found = lab.admin.describe_replica_sizes(broker, {topic: [0] for topic in topics})
            sizes.update({(topic, broker): found.get((topic, 0), 0) for topic in topics})
        readings.append(Reading(at, sizes, {(broker, key): rate_in_force(lab, broker, key) for broker, key in rates}))
        status = lab.sidecar_get(reporter, "/status") or {}
        reported += [m for m in status.get("replication", {}).get("progress", []) if m["topic"] in topics]
        time.sleep(0.5)
    return readings, reported


def in_force(readings, expected: dict) -> list[Reading]:
    found = [reading for reading in readings if all(reading.rates[key] == rate for key, rate in expected.items())]
    assert found, f"never all in force: {expected}; seen {sorted({str(reading.rates) for reading in readings})}"
    return found


def rate(readings, value) -> float:
    """Growth per second of value(reading) from the first reading to the last: over seconds, as Kafka's
    quota lets replication through in bursts of a fetch."""
    assert len(readings) >= 2 and readings[-1].at - readings[0].at >= 5, \
        f"under 5 s of readings with the expected rates in force: {readings}"
    return (value(readings[-1]) - value(readings[0])) / (readings[-1].at - readings[0].at)


def assert_in_band(measured, throttle, what):
    assert RATE_LOWER < measured / throttle < RATE_UPPER, f"{what} ran at {measured:.0f} B/s under {throttle:.0f} B/s"


def moving_replica_closed_in(reported, topic, broker) -> bool:
    """The sidecar showed the replica moving at least twice, with fewer bytes behind the last time. (Its first
    reports may say none: the destination's replica not created yet, or its size not read that pass.)"""
    behind = [m["bytes_behind"] for m in reported if (m["topic"], m["broker"], m["state"]) == (topic, broker, "moving")
              and m["bytes_behind"] is not None]
    return len(behind) >= 2 and behind[-1] < behind[0]


def test_a_steady_move_runs_at_the_throttle_and_ends_when_its_eta_said(lab):
    topic = lab.move_topics["eta"]
    with overrides(lab, OVERRIDE):
        try:
            size = lab.admin.describe_replica_sizes(SOURCE, {topic: [0]})[(topic, 0)]
            # Kafka's tool puts the same throttle in force from the start; the sidecars take it over at their
            # first pass (a pass may be slow on a loaded machine), at the same rate.
            execute(lab, to_destination(topic), OVERRIDE)
            started = time.monotonic()
            eta, seen, growth = None, None, []
            while moving(lab, topic):
                now = time.monotonic() - started
                assert now < SETTINGS.move_timeout, \
                    f"the move did not end in {SETTINGS.move_timeout}s; see {lab.work_dir}"
                replica = lab.admin.describe_replica_sizes(DESTINATION, {topic: [0]}).get((topic, 0), 0)
                growth.append((now, replica))
                if eta is None and now >= ETA_AT:
                    seen = progress(lab, topic)
                    if seen is not None and seen["eta_seconds"] is not None:
                        eta = (now - seen["age"], seen["eta_seconds"])  # as of the pass that computed it
                time.sleep(0.5)
            took = time.monotonic() - started
        finally:
            verify(lab, to_destination(topic))

    assert eta is not None, f"no ETA was reported {ETA_AT}s into the throttled move; last progress {seen}; see {lab.work_dir}"
    reported_at, reported = eta
    actual = took - reported_at
    assert abs(reported - actual) <= ETA_TOLERANCE * actual, \
        f"ETA {reported:.1f}s reported at {reported_at:.1f}s; the move took {actual:.1f}s more ({size} bytes)"
    # (a) at the throttle: the destination's growth over the throttled part of the move (after the first 5 s)
    steady = [(at, size_) for at, size_ in growth if at >= 5]
    assert_in_band((steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0]), OVERRIDE, "the move")
    assert RATE_LOWER < seen["catch_up_bytes_per_sec"] / OVERRIDE < RATE_UPPER, f"reported catch-up: {seen}"
    assert seen["state"] == "moving" and seen["incoming_bytes_per_sec"] == 0, seen


def test_b_a_move_with_a_producer_closes_its_gap_at_the_throttle_minus_the_inbound_rate(lab):
    topic = lab.move_topics["inbound"]
    producer = producer_performance(lab.cluster.bootstrap_servers, topic, 10**9, INBOUND / RECORD_BYTES,
                                    lab.work_dir / "inbound-produce.log")
    try:
        def size():
            return lab.admin.describe_replica_sizes(SOURCE, {topic: [0]})[(topic, 0)]
        before = size()
        eventually(lambda: size() > before, 60, "the producer writing into the partition")
        with overrides(lab, INBOUND_THROTTLE):
            execute(lab, to_destination(topic), INBOUND_THROTTLE)
            try:
                readings, reported = follow(lab, [topic], (SOURCE, DESTINATION),
                                            [(SOURCE, LEADER_RATE), (DESTINATION, FOLLOWER_RATE)], SOURCE)
            finally:
                verify(lab, to_destination(topic))
    finally:
        producer.terminate()
        producer.wait(15)

    throttled = [r for r in in_force(readings, {(SOURCE, LEADER_RATE): INBOUND_THROTTLE,
                                                (DESTINATION, FOLLOWER_RATE): INBOUND_THROTTLE})
                 if r.behind(topic, SOURCE, DESTINATION) > 0]
    inbound = rate(throttled, lambda r: r.sizes[(topic, SOURCE)])
    closing = -rate(throttled, lambda r: r.behind(topic, SOURCE, DESTINATION))
    assert inbound > INBOUND / 2, f"the producer wrote {inbound:.0f} B/s into the moving partition, not ~{INBOUND}"
    # Progress = replication - inbound; Kafka's band bounds the replication against the throttle (applied to the
    # difference, it would shrink the band by the inbound share: 1.09 x 1.5 MB/s closed a 1 MB/s gap at 1.14x).
    assert_in_band(closing + inbound, INBOUND_THROTTLE,
                   f"the destination's replication (the gap closing at {closing:.0f} B/s + inbound {inbound:.0f} B/s)")
    assert any(m["broker"] == DESTINATION and m["state"] == "moving" and (m["incoming_bytes_per_sec"] or 0) > 0
               for m in reported), f"the sidecar never saw the inbound rate: {reported}"
    assert moving_replica_closed_in(reported, topic, DESTINATION), reported


def test_c_one_source_to_two_destinations_each_at_its_follower_rate_within_the_sources_leader_rate(lab):
    topic = lab.move_topics["spread"]
    targets = {(topic, 0): [2, DESTINATION]}
    followers = {2: SPREAD_FAST, DESTINATION: SPREAD_GLOBAL}
    with overrides(lab, SPREAD_GLOBAL), ExitStack() as stack:
        execute(lab, targets, SPREAD_GLOBAL)
        # The broker overrides after the tool's rates: set before, the sidecars' rates (a broker override
        # holds without a move) would be overwritten by the tool's, and the sidecars leave alone what
        # someone else changed.
        stack.enter_context(overrides(lab, None, [(2, SPREAD_FAST), (SOURCE, SPREAD_SOURCE)]))
        try:
            readings, reported = follow(lab, [topic], (SOURCE, *followers),
                                        [(SOURCE, LEADER_RATE), *((b, FOLLOWER_RATE) for b in followers)], SOURCE)
        finally:
            verify(lab, targets)

    throttled = in_force(readings, {(SOURCE, LEADER_RATE): SPREAD_SOURCE,
                                    **{(broker, FOLLOWER_RATE): rate_ for broker, rate_ in followers.items()}})
    for broker, throttle in followers.items():
        behind = [r for r in throttled if r.behind(topic, SOURCE, broker) > 0]
        assert_in_band(rate(behind, lambda r: r.sizes[(topic, broker)]), throttle, f"the move to broker {broker}")
        assert moving_replica_closed_in(reported, topic, broker), f"broker {broker}: {reported}"
    # The source's one leader rate covers both replicas: it sends what both follower rates let through.
    both = [r for r in throttled if all(r.behind(topic, SOURCE, broker) > 0 for broker in followers)]
    sent = rate(both, lambda r: sum(r.sizes[(topic, broker)] for broker in followers))
    assert_in_band(sent, sum(followers.values()), f"broker {SOURCE} sending to both")
    # The faster replica is caught up while the other still moves: the move ends when both are.
    states = [m["state"] for m in reported if m["broker"] == 2]
    assert "moving" in states and "caught_up" in states[states.index("moving"):], states


def test_d_two_sources_to_one_destination_share_its_follower_rate(lab):
    topics = [lab.move_topics["gather-1"], lab.move_topics["gather-2"]]
    leaders = dict(zip(topics, (SOURCE, 2)))
    with overrides(lab, GATHER):
        execute(lab, to_destination(*topics), GATHER)
        try:
            readings, reported = follow(lab, topics, (SOURCE, 2, DESTINATION), [(DESTINATION, FOLLOWER_RATE)],
                                        DESTINATION)
        finally:
            verify(lab, to_destination(*topics))

    both = [r for r in in_force(readings, {(DESTINATION, FOLLOWER_RATE): GATHER})
            if all(r.behind(topic, leaders[topic], DESTINATION) > 0 for topic in topics)]
    received = rate(both, lambda r: sum(r.sizes[(topic, DESTINATION)] for topic in topics))
    assert_in_band(received, GATHER, f"the two moves into broker {DESTINATION} together")
    for topic in topics:
        assert moving_replica_closed_in(reported, topic, DESTINATION), f"{topic}: {reported}"


def test_a_throttle_below_the_incoming_rate_is_reported_stuck_then_kept_up_and_the_move_ends(lab):
    topic = lab.load_topic
    execute(lab, to_destination(topic), PRODUCE * 3 // 8)  # an operator's throttle below what the producer writes
    started, states, rates = time.monotonic(), set(), set()
    while moving(lab, topic):
        assert time.monotonic() - started < SETTINGS.move_timeout, \
            f"the move did not end; states seen {states}, leader rates {rates}; see {lab.work_dir}\n{lab.logs()}"
        seen = progress(lab, topic)
        if seen is not None:
            states.add((seen["state"], seen["stuck_reason"]))
        rates.add(rate_in_force(lab, SOURCE, LEADER_RATE))
        time.sleep(0.25)
    verify(lab, to_destination(topic))

    log = lab.sidecars[DESTINATION].log_path.read_text(errors="replace")  # a stuck move is said at once
    source_log = lab.sidecars[SOURCE].log_path.read_text(errors="replace")
    assert ("stuck", "cannot_keep_up") in states or "is stuck (cannot_keep_up)" in log, \
        f"never reported cannot_keep_up; states {states}"
    assert re.search(rf"broker {SOURCE} {re.escape(LEADER_RATE)}: .* \(keep_up\)", source_log), \
        f"the source's leader rate was never raised for keep_up; rates {sorted(r for r in rates if r)}"
    ended = rf"move of {topic}-0 to broker {DESTINATION} ended after \d+ s"  # said at the sidecar's next pass
    eventually(lambda: re.search(ended, lab.sidecars[DESTINATION].log_path.read_text(errors="replace")), 120,
               "the destination's sidecar saying the move ended")
