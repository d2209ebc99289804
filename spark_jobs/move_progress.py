"""How far every move is, when it ends, and what throttle keeps it going (KIP-73 Q&A, KAFKA-1546).

The moves ride in the replication rates' job (``replication_rates.decide``): each broker-role row carries
every adding replica in ``moving_replicas`` (``schemas.MOVING_REPLICA_SCHEMA``, built by
``quota_sidecar.observe.moves`` from the readings of past passes), and higher-order functions over that array give,
in one projection, each replica's rates, ETA, state and stuck reason (``moves``); per destination broker its
SumReplicaLag and the ETA of its slowest replica (``destinations``); and the row's keep_up floor,
(1 + margin) x the incoming rates of the moving partitions its broker receives (follower) or leads (leader),
which the rate rule compares with its own rate. No second job and no join: a separate job for the moves,
joining three aggregates, took three times the rates' time and stretched the passes of a shared Spark
Connect server from 1 s to 3 s. Spark SQL text, as in the other jobs.
"""
from pyspark.sql import DataFrame

from quota_sidecar.common.observation import FOLLOWER
from quota_sidecar.common.vocabulary import CANNOT_KEEP_UP, CAUGHT_UP, MOVING, NO_PROGRESS, STUCK

MOVE_COLUMNS = ("topic", "partition", "broker", "leader", "bytes_behind", "lag_seconds", "catch_up_bytes_per_sec",
                "incoming_bytes_per_sec", "eta_seconds", "state", "stuck_reason")

# Of one adding replica r. Growth from the oldest reading in the network window to now; a replica that
# shrank (retention) grew 0.
_CATCH_UP = "CASE WHEN r.replica_growth_seconds > 0 THEN greatest(r.replica_growth_bytes, 0) / r.replica_growth_seconds END"
_INCOMING = "CASE WHEN r.leader_growth_seconds > 0 THEN greatest(r.leader_growth_bytes, 0) / r.leader_growth_seconds END"

# Caught up: 0. Catching up faster than the leader grows: the gap over the difference. Else it never ends.
_ETA = """CASE
    WHEN r.bytes_behind = 0 THEN 0.0D
    WHEN r.bytes_behind IS NOT NULL AND r.catch_up_bytes_per_sec > r.incoming_bytes_per_sec
        THEN r.bytes_behind / (r.catch_up_bytes_per_sec - r.incoming_bytes_per_sec)
END"""

# (stuck_after_seconds is the row's setting, outside the lambda)
_STUCK_REASON = f"""CASE
    WHEN r.bytes_behind = 0 THEN NULL
    WHEN r.incoming_bytes_per_sec > 0 AND r.catch_up_bytes_per_sec <= r.incoming_bytes_per_sec THEN '{CANNOT_KEEP_UP}'
    WHEN r.lag_seconds >= stuck_after_seconds AND r.bytes_behind >= r.behind_then THEN '{NO_PROGRESS}'
END"""

_STATE = f"""CASE
    WHEN r.bytes_behind = 0 THEN '{CAUGHT_UP}'
    WHEN r.stuck_reason IS NOT NULL THEN '{STUCK}'
    ELSE '{MOVING}'
END"""


def _each(array: str, fields: list[tuple[str, str | None]]) -> str:
    """Every element r of `array` as a struct of `fields`: (name, SQL over r), or (name, None) to keep r's."""
    made = ", ".join(f"{sql or f'r.{name}'} AS {name}" for name, sql in fields)
    return f"transform({array}, r -> struct({made}))"


_KEPT = ("topic", "partition", "broker", "leader", "bytes_behind", "lag_seconds")
_RATES = _each("moving_replicas", [(name, None) for name in (*_KEPT, "behind_then")]
               + [("catch_up_bytes_per_sec", _CATCH_UP), ("incoming_bytes_per_sec", _INCOMING)])
_VERDICTS = _each(_RATES, [(name, None) for name in (*_KEPT, "catch_up_bytes_per_sec", "incoming_bytes_per_sec")]
                  + [("eta_seconds", _ETA), ("stuck_reason", _STUCK_REASON)])
# Sorted by topic, partition, broker: a struct array sorts by its first fields.
_MOVES = f"array_sort({_each(_VERDICTS, [(name, _STATE if name == 'state' else None) for name in MOVE_COLUMNS])})"

# Per destination broker (d: the broker and its replicas): null ETA when one of them never ends.
_DESTINATIONS = """transform(
    transform(array_sort(array_distinct(transform(moves, m -> m.broker))),
              b -> struct(b AS broker, filter(moves, m -> m.broker = b) AS replicas)),
    d -> struct(
        d.broker AS broker,
        size(d.replicas) AS replicas,
        aggregate(d.replicas, CAST(NULL AS BIGINT),
                  (total, m) -> CASE WHEN m.bytes_behind IS NULL THEN total ELSE coalesce(total, 0L) + m.bytes_behind END)
            AS sum_replica_lag_bytes,
        CASE WHEN forall(d.replicas, m -> m.eta_seconds IS NOT NULL)
            THEN array_max(transform(d.replicas, m -> m.eta_seconds)) END AS eta_seconds,
        size(filter(d.replicas, m -> m.state = '""" + STUCK + """')) AS stuck))"""

# The row's broker receives the moves whose destination it is (follower) and sends those it leads (leader);
# null while none of their incoming rates is known.
_KEEP_UP_FLOOR = f"""aggregate(
    filter(moves, m -> CASE role WHEN '{FOLLOWER}' THEN m.broker ELSE m.leader END = broker_id),
    CAST(NULL AS DOUBLE),
    (total, m) -> CASE WHEN m.incoming_bytes_per_sec IS NULL THEN total
                       ELSE coalesce(total, 0.0D) + m.incoming_bytes_per_sec END)
    * (1 + keep_up_margin_percent / 100)"""


def transform(rows_df: DataFrame) -> DataFrame:
    """The rows (``schemas.REPLICATION_PASS_SCHEMA``) with ``moves`` (``MOVE_COLUMNS``, by topic, partition,
    broker), ``destinations`` (broker, replicas, sum_replica_lag_bytes, eta_seconds, stuck; by broker) and
    their ``keep_up_floor_bytes_per_sec``. One projection: each column uses those before it."""
    return rows_df.selectExpr("*", f"{_MOVES} AS moves", f"{_DESTINATIONS} AS destinations",
                              f"{_KEEP_UP_FLOOR} AS keep_up_floor_bytes_per_sec")
