"""What Kafka promises of a throttled rate, in the terms its own tests measure it with.

A quota (client or replication) is a rate over `quota.window.num` windows of `quota.window.size.seconds`
(11 x 1 s by default, `replication.quota.window.*` alike), and Kafka's `Rate` divides by at least num - 1
windows: a quota of R B/s lets about R x 10 s through at once before it holds, and as that burst's windows
expire the next one can follow, so any span of t seconds holds at most R x (t + one quota window). The quota
is checked before a fetch or a produce request, not during it, so one more request (up to
`replica.fetch.max.bytes` for a replica) gets through on top. Over a longer time the rate must lie in ReplicationQuotasTest's band:
"In a short test the brokers can be read unfairly, so assert against the average".
"""

from __future__ import annotations

QUOTA_WINDOW_SECONDS = 11.0
BAND = (0.5, 1.1)


def most_let_through(rate: float, seconds: float, request_bytes: int) -> float:
    """The most a quota of `rate` B/s lets through in `seconds` from its first byte, within Kafka's band: the
    rate over those seconds and one quota window of it at once (a first burst), and one request more."""
    return BAND[1] * rate * (seconds + QUOTA_WINDOW_SECONDS) + request_bytes


def slope(samples: list[tuple[float, int]]) -> float:
    """Bytes per second: the least-squares slope of (seconds, bytes) samples taken on the test's own clock."""
    if len(samples) < 2:
        raise ValueError(f"a rate needs two samples at least, got {len(samples)}")
    mean_at = sum(at for at, _ in samples) / len(samples)
    mean_size = sum(size for _, size in samples) / len(samples)
    spread = sum((at - mean_at) ** 2 for at, _ in samples)
    if spread == 0:
        raise ValueError("a rate needs samples at different times")
    return sum((at - mean_at) * (size - mean_size) for at, size in samples) / spread
