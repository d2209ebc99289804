"""KIP-73's test plan for moves you can watch, predict and unstick, on real rate-limited links.

One lab (tests/harness/move_lab.py) for the module: brokers 1, 2, 3 each in a network namespace behind a
6 MB/s link, a sidecar beside each, and a steady client load on the source broker: Kafka's producer writing
0.8 MB/s into `client-load`, one reader tailing it and one re-reading its history at 1.6 MB/s.

- (a)+(f): a partition with no produce moves under an operator's global throttle (the sidecars' override);
  it starts with `kafka-reassign-partitions --throttle` at the same rate, which the sidecars take over at
  their first pass; it runs at the throttle (Kafka's 0.5-1.1x band), they report its catch-up rate, and the ETA they report 20 s into
  the move is within +-25 % of the time it then took.
- (e): the `client-load` partition itself moves, under an operator's `--throttle` below what the producer
  writes into it (0.3 MB/s against 0.8 MB/s). The sidecars are told
  the links carry 3 MB/s; the readers leave the source so little of that that the rule's leader rate is
  below the partition's incoming rate: the move is reported stuck (cannot_keep_up), the source's rate is
  raised to the keep_up floor, and the move ends.
"""

import re
import time
from datetime import datetime, timezone

import pytest

from harness import kafka_tools
from harness.move_lab import DESTINATION, SOURCE, LabSettings, LoadProfile, MoveLab
from harness.netns import unavailable_reason
from harness.sidecar_process import http
from harness.waiting import eventually
from quota_sidecar.throttles import LEADER_RATE

pytestmark = [pytest.mark.integration, pytest.mark.netns]

TOKEN = "moves-test-token"
PRODUCE = 800_000
SETTINGS = LabSettings(
    capacity=6_000_000,
    sidecar_capacity=3_000_000,
    # Steady: the replaying reader's "peak" lasts an hour.
    load=LoadProfile(produce=PRODUCE, replay=1_600_000, peak_seconds=3600, quiet_seconds=1),
    move_bytes=64 << 20,
    load_history_bytes=16 << 20,
    moves=("eta",),
    max_percent=90.0,
    network_window_seconds=8,  # the rates an ETA divides by: Kafka's quota makes replication bursty
    check_interval_seconds=1,
    subnet=3,
    move_timeout=240.0,
    # A pass may wait long for the shared Spark Connect server on a loaded machine: a late pass, not a failed one.
    sidecar_properties=(("api.token", TOKEN), ("replication.keep.up.margin.percent", 100), ("poll.timeout", "PT60S")),
)
OVERRIDE = 1_000_000
RATE_LOWER, RATE_UPPER = 0.5, 1.1  # Kafka's ReplicationQuotasTest band
ETA_AT, ETA_TOLERANCE = 20.0, 0.25


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


def moving(lab, topic) -> bool:
    return any(move.topic == topic for move in lab.admin.list_reassignments())


def execute(lab, topic, throttle):
    done = kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, {(topic, 0): [DESTINATION]}, "--execute",
                                           "--throttle", str(throttle))
    assert done.returncode == 0, done.stdout + done.stderr


def verify(lab, topic):
    """kafka-reassign-partitions --verify: what removes its throttles once the move is done."""
    kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, {(topic, 0): [DESTINATION]}, "--verify")


def test_a_steady_move_runs_at_the_throttle_and_ends_when_its_eta_said(lab):
    topic = lab.move_topics["eta"]
    url = lab.sidecars[SOURCE].url + "/throttle"
    code, answer = http("PUT", url, {"rate": OVERRIDE}, token=TOKEN)
    assert code == 200, answer
    try:
        size = lab.admin.describe_replica_sizes(SOURCE, {topic: [0]})[(topic, 0)]
        # Kafka's tool puts the same throttle in force from the start; the sidecars take it over at their
        # first pass (a pass may be slow on a loaded machine), at the same rate.
        execute(lab, topic, OVERRIDE)
        started = time.monotonic()
        eta, seen, growth = None, None, []
        while moving(lab, topic):
            now = time.monotonic() - started
            assert now < SETTINGS.move_timeout, f"the move did not end in {SETTINGS.move_timeout}s; see {lab.work_dir}"
            replica = lab.admin.describe_replica_sizes(DESTINATION, {topic: [0]}).get((topic, 0), 0)
            growth.append((now, replica))
            if eta is None and now >= ETA_AT:
                seen = progress(lab, topic)
                if seen is not None and seen["eta_seconds"] is not None:
                    eta = (now - seen["age"], seen["eta_seconds"])  # as of the pass that computed it
            time.sleep(0.5)
        took = time.monotonic() - started
    finally:
        http("DELETE", url, token=TOKEN)
        verify(lab, topic)

    assert eta is not None, f"no ETA was reported {ETA_AT}s into the throttled move; last progress {seen}; see {lab.work_dir}"
    reported_at, reported = eta
    actual = took - reported_at
    assert abs(reported - actual) <= ETA_TOLERANCE * actual, \
        f"ETA {reported:.1f}s reported at {reported_at:.1f}s; the move took {actual:.1f}s more ({size} bytes)"
    # (a) at the throttle: the destination's growth over the throttled part of the move (after the first 5 s)
    steady = [(at, size_) for at, size_ in growth if at >= 5]
    rate = (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
    assert RATE_LOWER < rate / OVERRIDE < RATE_UPPER, f"the move ran at {rate:.0f} B/s under a {OVERRIDE} B/s throttle"
    assert RATE_LOWER < seen["catch_up_bytes_per_sec"] / OVERRIDE < RATE_UPPER, f"reported catch-up: {seen}"
    assert seen["state"] == "moving" and seen["incoming_bytes_per_sec"] == 0, seen


def test_a_throttle_below_the_incoming_rate_is_reported_stuck_then_kept_up_and_the_move_ends(lab):
    topic = lab.load_topic
    execute(lab, topic, PRODUCE * 3 // 8)  # an operator's throttle below what the producer writes
    started, states, rates = time.monotonic(), set(), set()
    while moving(lab, topic):
        assert time.monotonic() - started < SETTINGS.move_timeout, \
            f"the move did not end; states seen {states}, leader rates {rates}; see {lab.work_dir}\n{lab.logs()}"
        seen = progress(lab, topic)
        if seen is not None:
            states.add((seen["state"], seen["stuck_reason"]))
        leader = lab.admin.describe_configs("broker", [SOURCE], [LEADER_RATE]).get(str(SOURCE), {}).get(LEADER_RATE)
        rates.add(None if leader is None else int(leader))
        time.sleep(0.25)
    verify(lab, topic)

    log = lab.sidecars[DESTINATION].log_path.read_text(errors="replace")  # a stuck move is said at once
    source_log = lab.sidecars[SOURCE].log_path.read_text(errors="replace")
    assert ("stuck", "cannot_keep_up") in states or "is stuck (cannot_keep_up)" in log, \
        f"never reported cannot_keep_up; states {states}"
    assert re.search(rf"broker {SOURCE} {re.escape(LEADER_RATE)}: .* \(keep_up\)", source_log), \
        f"the source's leader rate was never raised for keep_up; rates {sorted(r for r in rates if r)}"
    ended = rf"move of {topic}-0 to broker {DESTINATION} ended after \d+ s"  # said at the sidecar's next pass
    eventually(lambda: re.search(ended, lab.sidecars[DESTINATION].log_path.read_text(errors="replace")), 120,
               "the destination's sidecar saying the move ended")
