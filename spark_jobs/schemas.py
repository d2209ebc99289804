"""The rows the aggregations read, and how Python rows become a DataFrame of them.

The rows an agent sends on the pipeline, and the observation that carries them, are spelled once in
quota_sidecar/pipeline/schema.py; their StructTypes here are made from it (``struct_type``).
"""
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from quota_sidecar.pipeline import schema as wire

_ATOMS = {wire.INT: IntegerType(), wire.LONG: LongType(), wire.DOUBLE: DoubleType(),
          wire.STRING: StringType(), wire.BOOLEAN: BooleanType()}


def struct_type(struct: wire.Struct) -> StructType:
    """The StructType of a struct of pipeline/schema.py: its fields, in its order, nullable as it says."""
    return StructType([StructField(field.name, _data_type(field.type), nullable=field.nullable)
                       for field in struct.fields])


def _data_type(of: wire.Type) -> DataType:
    if isinstance(of, wire.Struct):
        return struct_type(of)
    if isinstance(of, wire.Array):
        return ArrayType(_data_type(of.element))
    return _ATOMS[of]


# The rows of the pipeline's observations (pipeline/schema.py says what each is).
VOLUME_SCHEMA = struct_type(wire.VOLUME)
MOVING_REPLICA_SCHEMA = struct_type(wire.MOVING_REPLICA)
REPLICATION_PASS_SCHEMA = struct_type(wire.REPLICATION_PASS)
LIMITS_SCHEMA = struct_type(wire.LIMITS)
OBSERVATION_SCHEMA = struct_type(wire.OBSERVATION)

# One broker in one replication role as the rate rule reads it: the role an agent sends (BROKER_ROLE of
# pipeline/schema.py) and KIP-73's lower bound, which the rule computes from the moves' progress (move_progress.py):
# what the moves through this broker in this role take in, with the margin.
BROKER_ROLE_SCHEMA = StructType(
    struct_type(wire.BROKER_ROLE).fields
    + [StructField("keep_up_floor_bytes_per_sec", DoubleType(), nullable=True)]
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
    import pyarrow as pa  # here, not above: the aggregator runs without it (commands.aggregate)
    from pyspark.sql.pandas.types import to_arrow_schema

    # Through Arrow rather than a list: no Python worker starts, and a warm poll is three times faster.
    # One partition: a window or an aggregation over it then needs no shuffle, and the job is one stage
    # of one task (a third less of the driver's CPU per decision).
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=to_arrow_schema(schema))).coalesce(1)
