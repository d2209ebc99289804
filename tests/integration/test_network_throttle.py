"""Replication under the sidecars on real rate-limited links, against the static rate an operator would set.

Each broker runs in a network namespace of its own behind a 6 MB/s link (tests/harness/network/netns.py: veth pairs
on a bridge, `tc ... tbf` on both ends), with a sidecar inside the same namespace measuring that link.
Clients read from the source broker at 3 MB/s in peaks and 0.3 MB/s in between, on the link the move
uses (tests/harness/network/move_lab.py). One partition moves under a static throttle, another under the sidecars.

What "the static rate that keeps the same client headroom" is: the sidecar gives replication max% of
what the clients leave of the link, so at the clients' peak P it leaves them (capacity - P) x (1 - max%)
of headroom. An operator using kafka-reassign-partitions --throttle sets one rate for the whole move
and cannot know when the peaks come, so the rate must be safe at the peak: (capacity - P) x max%, the
very rate the sidecar computes at the peak, with P measured on the link as the sidecar sees it. Equal
headroom at the peak; the sidecar may only win by giving replication what the clients leave between
peaks.

The sidecars react to a move only at their next pass (until then it runs unthrottled; both moves start
as a quiet phase begins, where the clients leave room for that) and to a peak only once their window
has seen it. Equal headroom then means that late in a peak the sidecars have lowered the source's
throttle to about the static rate. They can because they measure the replication traffic (the growth
of the moving replica) rather than take the rate in force for it: Kafka's replication runs below its
throttle (0.7-0.8x here), so with the rate in force the clients' share looked smaller than it was and
the throttle climbed to max% of the link and stayed there.
"""

import pytest

from harness.clients.lab_clients import LoadProfile
from harness.network.move_lab import LabSettings, MoveLab
from harness.network.netns import unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.network_lab]

# Peaks of 30 s: on a link the move fills, each pass takes the source's throttle one step down (the clients get less
# than they ask, so each new window of their traffic shows a little more of it), and a step needs the window (4 s)
# and a pass, a round trip through the aggregator: seconds beside busy processes. Peaks of 20 s hold too few such
# steps under load for the throttle at a peak's end to come near equal headroom (docs/benchmarks.md, "The network
# lab"). Quiet phases of 15 s: the throttle rises in one step there
# (the link has room, the clients' traffic is what they ask). At the sidecars' rates the move (144 MiB) spans a
# quiet phase and a whole peak, and the test takes about as long as with 20-s phases.
SETTINGS = LabSettings(
    capacity=6_000_000,
    load=LoadProfile(produce=300_000, replay=2_700_000, peak_seconds=30, quiet_seconds=15),
    move_bytes=144 << 20,
    max_percent=90.0,
    network_window_seconds=4,
    check_interval_seconds=1,
    subnet=0,
)
# Kafka's ReplicationQuotasTest: "In a short test the brokers can be read unfairly, so assert against
# the average": the measured rate must lie between 0.5x and 1.1x the throttle.
RATE_LOWER, RATE_UPPER = 0.5, 1.1
# As a peak ends equal headroom means the source's throttle is back near the static rate, well below where it is in
# the quiet phases. Where the sidecars got to by the peak's end, not an average over its second half: on a link the
# move fills, the clients get less than they ask, and each pass (a new window of their traffic) takes the throttle
# a step down (4.4 -> 3.8 -> ... MB/s), one step in 5 s beside two busy processes. Taking the rate in force for the
# replication traffic (no measurement) left it at 0.9-1.2x its quiet level and 1.5-2.6x the static rate; measured,
# it was about 1.1x the static rate and 0.7x its quiet level.
PEAK_SLACK, PEAK_BELOW_QUIET = 1.5, 0.8
# ...and there the clients get about what they get under the static rate: 98% in the benchmark, 86% in a fresh
# `make test` (2,444,900 against 2,844,262 B/s; the throttle late in the peaks 1.09x the static rate): on a link the
# clients and the move fill together, the clients' traffic the sidecars measure is what they got, not what they
# wanted, and the throttle settles a little above the static rate. Judged in each peak's last window (4 s), where the
# throttle stands where the sidecars got to: over the peak's second half, beside two busy processes (passes of
# 2.7 s, a step each), the clients got 76% while the throttle was still coming down (4.4 -> 2.9 MB/s).
CLIENT_SHARE = 0.8
# On a busy machine the clients may not reach their peak during the move (their replay starved of CPU, not of the
# link): the sidecars then rightly leave replication more, and equal headroom is judged against the clients'
# traffic as it was on the link. Only while the link had room in the peaks: a throttle that takes the clients'
# share fills the link (by design the peaks use ~0.9 of it: the clients, and replication at 0.7-0.8 of a throttle
# of 0.9 of what they leave), and then the clients' peak measured in the static move stays the measure.
LINK_FULL = 0.9


@pytest.fixture
def lab(make_kafka_cluster, tmp_path):
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no rate-limited network namespaces on this machine: {reason}")
    with MoveLab(SETTINGS, make_cluster=make_kafka_cluster, work_dir=str(tmp_path)) as lab:
        yield lab


def test_replication_follows_the_sidecar_throttle_and_moves_faster_than_the_static_rate_at_equal_headroom(lab):
    lab.start_sidecars(wait=False)  # they start while the client load is measured
    peak, quiet = lab.measure_client_traffic()
    assert peak > 2 * quiet, f"the client load does not vary: peak {peak:.0f} B/s, quiet {quiet:.0f} B/s"
    lab.wait_for_sidecars()

    adaptive = lab.run_adaptive()
    lab.stop_sidecars()
    static_rate = lab.static_rate()
    static = lab.run_static(static_rate)

    figures = (f"static {static.figures()}\nadaptive {adaptive.figures()}\nclient peak {peak:.0f} B/s, "
               f"quiet {quiet:.0f} B/s\nsidecar logs in {lab.work_dir}")
    print(figures)  # in the JUnit XML of a passing run too (tests/soak_timed.py)
    for result in (static, adaptive):
        assert result.throttled_seconds >= 5, f"{result.mode}: too little time under a throttle to judge\n{figures}"
        assert RATE_LOWER < result.rate_ratio < RATE_UPPER, \
            f"{result.mode}: replication at {result.rate_ratio:.2f}x its throttle\n{figures}"
    assert adaptive.throttle_max > static_rate, f"the sidecars never gave more than the static rate\n{figures}"
    assert adaptive.move_seconds < static.move_seconds, f"the sidecars' move did not finish first\n{figures}"
    late, quiet_level = adaptive.leader_at_peak_ends, adaptive.leader_at_quiet_ends
    assert late is not None, f"no throttle in force as a client peak ended: nothing to compare\n{figures}"
    link_had_room = adaptive.link_in_peaks is not None and adaptive.link_in_peaks < LINK_FULL * SETTINGS.capacity
    # The clients' peak on the link as the sidecars see it, measured during a move as the sidecars measure it: late
    # in the static move's peaks, where the static rate leaves them room. The window before the moves read 3.71 and
    # 4.04 MB/s beside two busy processes where the static move's peaks read 3.58 and 3.57: a starved reader's
    # paused fetches come again, and how often varies with the CPU it gets.
    clients = static.clients_on_link_late_in_peaks
    if link_had_room and adaptive.clients_on_link_late_in_peaks is not None:
        clients = min(clients, adaptive.clients_on_link_late_in_peaks)  # held back by the CPU, not by the link
    equal_headroom = lab.static_rate_for(clients)
    assert late <= PEAK_SLACK * equal_headroom, \
        f"as the peaks ended the source's throttle was {late} B/s against equal headroom at {equal_headroom} B/s\n" \
        f"{figures}"
    assert quiet_level is None or late <= PEAK_BELOW_QUIET * quiet_level, \
        f"the throttle did not back off in the peaks: {late} B/s there, {quiet_level} B/s between them\n{figures}"
    assert adaptive.client_late_peak_throughput >= CLIENT_SHARE * static.client_late_peak_throughput or link_had_room, \
        f"the clients read less late in their peaks under the sidecars than under the static rate\n{figures}"
