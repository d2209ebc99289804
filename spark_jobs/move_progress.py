"""How far every move is, when it ends, and what throttle keeps it going (KIP-73 Q&A, KAFKA-1546).

The moves ride in the replication rates' job (``replication_rates.decide``): each broker-role row carries
every adding replica in ``moving_replicas`` (``schemas.MOVING_REPLICA_SCHEMA``, built by
``quota_sidecar.observe.moves`` from the readings of past passes), and higher-order functions over that array give
each replica's rates, ETA, state and stuck reason (``moves``); per destination broker its
SumReplicaLag and the ETA of its slowest replica (``destinations``); and the row's keep_up floor,
(1 + margin) x the incoming rates of the moving partitions its broker receives (follower) or leads (leader),
which the rate rule compares with its own rate. No second job and no join: a job of its own for the moves,
joined with the rates, made each pass slower (docs/benchmarks.md).
"""
from pyspark.sql import Column, DataFrame

from quota_sidecar.common.observation import FOLLOWER
from quota_sidecar.common.vocabulary import CANNOT_KEEP_UP, CAUGHT_UP, MOVING, NO_PROGRESS, STUCK
from spark_jobs import columns

MOVE_COLUMNS = ("topic", "partition", "broker", "leader", "bytes_behind", "lag_seconds", "catch_up_bytes_per_sec",
                "incoming_bytes_per_sec", "eta_seconds", "state", "stuck_reason")
_KEPT = ("topic", "partition", "broker", "leader", "bytes_behind", "lag_seconds")


def transform(rows_df: DataFrame) -> DataFrame:
    """The rows (``schemas.REPLICATION_PASS_SCHEMA``) with ``moves`` (``MOVE_COLUMNS``, by topic, partition,
    broker), ``destinations`` (broker, replicas, sum_replica_lag_bytes, eta_seconds, stuck; by broker) and
    their ``keep_up_floor_bytes_per_sec``."""
    F = columns.functions(rows_df)
    moves = F.col("moves")
    return (rows_df.select("*", _moves(F, F.col("moving_replicas"), F.col("stuck_after_seconds")).alias("moves"))
            .select("*", _destinations(F, moves).alias("destinations"),
                    _keep_up_floor(F, moves, F.col("role"), F.col("broker_id"), F.col("keep_up_margin_percent"))
                    .alias("keep_up_floor_bytes_per_sec")))


def _moves(F, moving_replicas: Column, stuck_after_seconds: Column) -> Column:
    """Every adding replica r judged: its rates, ETA, stuck reason and state; sorted by topic, partition,
    broker (a struct array sorts by its first fields)."""
    def rates(r: Column) -> Column:
        # Growth from the oldest reading in the network window to now; a replica that shrank (retention) grew 0.
        def growth(of: str) -> Column:
            seconds = r[f"{of}_growth_seconds"]
            return F.when(seconds > 0, F.greatest(r[f"{of}_growth_bytes"], F.lit(0)) / seconds)
        return _struct(F, r, (*_KEPT, "behind_then"), catch_up_bytes_per_sec=growth("replica"),
                       incoming_bytes_per_sec=growth("leader"))

    def verdicts(r: Column) -> Column:
        behind, catch_up, incoming = r["bytes_behind"], r["catch_up_bytes_per_sec"], r["incoming_bytes_per_sec"]
        # Caught up: 0. Catching up faster than the leader grows: the gap over the difference. Else it never ends.
        eta = (F.when(behind == 0, F.lit(0.0))
               .when(behind.isNotNull() & (catch_up > incoming), behind / (catch_up - incoming)))
        stuck_reason = (F.when(behind == 0, F.lit(None).cast("string"))
                        .when((incoming > 0) & (catch_up <= incoming), F.lit(CANNOT_KEEP_UP))
                        .when((r["lag_seconds"] >= stuck_after_seconds) & (behind >= r["behind_then"]),
                              F.lit(NO_PROGRESS)))
        return _struct(F, r, (*_KEPT, "catch_up_bytes_per_sec", "incoming_bytes_per_sec"), eta_seconds=eta,
                       stuck_reason=stuck_reason)

    def state(r: Column) -> Column:
        return (F.when(r["bytes_behind"] == 0, F.lit(CAUGHT_UP)).when(r["stuck_reason"].isNotNull(), F.lit(STUCK))
                .otherwise(F.lit(MOVING)))

    judged = F.transform(F.transform(moving_replicas, rates), verdicts)
    return F.array_sort(F.transform(judged, lambda r: F.struct(*(
        (state(r) if name == "state" else r[name]).alias(name) for name in MOVE_COLUMNS))))


def _struct(F, r: Column, kept: tuple[str, ...], **made: Column) -> Column:
    """A struct of r's `kept` fields, then the `made` ones."""
    return F.struct(*(r[name].alias(name) for name in kept), *(value.alias(name) for name, value in made.items()))


def _sum_of(F, values: Column, field: str, kind: str) -> Column:
    """The sum of `field` (of Spark type `kind`) over `values`, nulls skipped; null when none is known."""
    zero = F.lit(0).cast(kind)
    return F.aggregate(values, F.lit(None).cast(kind),
                       lambda total, m: F.when(m[field].isNull(), total).otherwise(F.coalesce(total, zero) + m[field]))


def _destinations(F, moves: Column) -> Column:
    """Per destination broker (d: the broker and its replicas): null ETA when one of them never ends."""
    brokers = F.array_sort(F.array_distinct(F.transform(moves, lambda m: m["broker"])))
    grouped = F.transform(brokers, lambda b: F.struct(
        b.alias("broker"), F.filter(moves, lambda m: m["broker"] == b).alias("replicas")))
    return F.transform(grouped, lambda d: F.struct(
        d["broker"].alias("broker"),
        F.size(d["replicas"]).alias("replicas"),
        _sum_of(F, d["replicas"], "bytes_behind", "bigint").alias("sum_replica_lag_bytes"),
        F.when(F.forall(d["replicas"], lambda m: m["eta_seconds"].isNotNull()),
               F.array_max(F.transform(d["replicas"], lambda m: m["eta_seconds"]))).alias("eta_seconds"),
        F.size(F.filter(d["replicas"], lambda m: m["state"] == STUCK)).alias("stuck")))


def _keep_up_floor(F, moves: Column, role: Column, broker_id: Column, margin_percent: Column) -> Column:
    """The row's broker receives the moves whose destination it is (follower) and sends those it leads (leader);
    null while none of their incoming rates is known."""
    through = F.filter(moves, lambda m: F.when(role == FOLLOWER, m["broker"]).otherwise(m["leader"]) == broker_id)
    return _sum_of(F, through, "incoming_bytes_per_sec", "double") * (1 + margin_percent / 100)
