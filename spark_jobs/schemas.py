"""The rows the aggregations read, and how Python rows become a DataFrame of them."""
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from quota_sidecar.common import storage_rule

# One log directory of one broker at one moment, as DescribeLogDirs reported it: the current poll's, or an
# earlier measurement within the fill window. at_seconds is that moment relative to the decision (0: now,
# -10: ten seconds before); a volume's newest row is its state now.
VOLUME_SCHEMA = StructType(
    [
        StructField("broker_id", IntegerType(), nullable=False),
        StructField("log_dir", StringType(), nullable=False),
        StructField("total_bytes", LongType(), nullable=False),
        StructField("available_bytes", LongType(), nullable=False),
        StructField("usable", BooleanType(), nullable=False),
        StructField("at_seconds", DoubleType(), nullable=False),
    ]
)

# One broker in one replication role ('leader' sends, 'follower' receives) with the settings of its rule.
BROKER_ROLE_SCHEMA = StructType(
    [
        StructField("broker_id", IntegerType(), nullable=False),
        StructField("role", StringType(), nullable=False),
        StructField("capacity_bytes", LongType(), nullable=False),
        StructField("used_bytes_per_sec", DoubleType(), nullable=True),  # null: network figures unreadable
        StructField("applied_rate", LongType(), nullable=True),  # null: no throttle in force
        StructField("measured_replication_bytes_per_sec", DoubleType(), nullable=True),
        StructField("max_percent", DoubleType(), nullable=False),
        StructField("min_rate", LongType(), nullable=False),
        StructField("change_threshold_percent", DoubleType(), nullable=False),
        StructField("consecutive_failures", IntegerType(), nullable=False),
        StructField("failure_threshold", IntegerType(), nullable=False),
        # KIP-73's lower bound: what the moves through this broker in this role take in, with the margin.
        StructField("keep_up_floor_bytes_per_sec", DoubleType(), nullable=True),
    ]
)

# One adding replica of an in-flight move (quota_sidecar.common.observation.MovingReplica).
MOVING_REPLICA_SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("partition", IntegerType(), nullable=False),
        StructField("broker", IntegerType(), nullable=False),
        StructField("leader", IntegerType(), nullable=False),
        StructField("bytes_behind", LongType(), nullable=True),
        StructField("lag_seconds", DoubleType(), nullable=True),
        StructField("behind_then", LongType(), nullable=True),
        StructField("replica_growth_bytes", LongType(), nullable=True),
        StructField("replica_growth_seconds", DoubleType(), nullable=True),
        StructField("leader_growth_bytes", LongType(), nullable=True),
        StructField("leader_growth_seconds", DoubleType(), nullable=True),
    ]
)

# What one replication pass decides in one Spark job (replication_rates.decide): each broker role with the
# settings of its rule, the moves' settings, and every adding replica of the cluster (the same on every row),
# from which the job computes the moves' progress and the role's keep_up floor.
REPLICATION_PASS_SCHEMA = StructType(
    [field for field in BROKER_ROLE_SCHEMA.fields if field.name != "keep_up_floor_bytes_per_sec"]
    + [
        StructField("stuck_after_seconds", DoubleType(), nullable=False),
        StructField("keep_up_margin_percent", DoubleType(), nullable=False),
        StructField("moving_replicas", ArrayType(MOVING_REPLICA_SCHEMA), nullable=False),
    ]
)


# One partition of a reassignment plan and one broker's role in it: a destination receives the leader's bytes
# (follower), the leader sends them (leader). `quota-sidecar plan` builds these.
PLAN_SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("partition", IntegerType(), nullable=False),
        StructField("broker_id", IntegerType(), nullable=False),
        StructField("role", StringType(), nullable=False),
        StructField("bytes", LongType(), nullable=False),
        StructField("incoming_bytes_per_sec", DoubleType(), nullable=True),
        StructField("capacity_bytes", LongType(), nullable=True),  # null: N not configured for the broker
        StructField("replication_factor", IntegerType(), nullable=False),
        StructField("throttle", LongType(), nullable=True),  # null: no throttle given or in force
        StructField("within_seconds", DoubleType(), nullable=True),
    ]
)


def frame_from_rows(spark: SparkSession, rows: list[dict], schema: StructType) -> DataFrame:
    """A DataFrame of ``rows`` (dicts keyed by field name; absent nullable fields are null)."""
    for row in rows:
        missing = [field.name for field in schema.fields if not field.nullable and row.get(field.name) is None]
        if missing:
            raise ValueError(f"row {row!r} has no value for {', '.join(missing)}")
    if not rows:  # Spark Connect infers the schema of an Arrow table from its rows, and refuses none
        return spark.createDataFrame([], schema)
    # Through Arrow rather than a list: no Python worker starts, and a warm poll is three times faster.
    # One partition: a window or an aggregation over it then needs no shuffle, and the job is one stage
    # of one task (a third less of the driver's CPU per decision).
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=to_arrow_schema(schema))).coalesce(1)


# The limits of the volume rule, as columns of each volume row (volume_violations.LIMIT_COLUMNS).
LIMITS_SCHEMA = StructType([StructField(name, {"BIGINT": LongType(), "DOUBLE": DoubleType()}[kind], nullable=True)
                            for name, kind in storage_rule.LIMIT_TYPES.items()])

# An agent's observation on the pipeline (quota_sidecar.common.pipeline_messages.observation): the rows of a rule,
# as a batch run would judge them, under the id its decision answers.
OBSERVATION_SCHEMA = StructType(
    [
        StructField("version", IntegerType()),
        StructField("id", StringType()),
        StructField("cluster", StringType()),
        StructField("agent", IntegerType()),
        StructField("observed_at", StringType()),
        StructField("volumes", StructType([StructField("rows", ArrayType(VOLUME_SCHEMA)),
                                           StructField("limits", LIMITS_SCHEMA)])),
        StructField("replication", StructType([StructField("rows", ArrayType(REPLICATION_PASS_SCHEMA))])),
    ]
)
