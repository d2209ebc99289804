"""The aggregator: one Spark Structured Streaming query that decides for every agent of every cluster.

Kafka source (the observations topic) → each micro-batch → Kafka sink (the decisions topic). A micro-batch
holds the observations of any number of agents and clusters; the rules judge them all in one job each,
grouped by observation, and every observation gets one decision under its agent's key
(quota_sidecar/pipeline/messages.py; the fields of both messages are those of pipeline/schema.py). An
observation of a version this aggregator does not read gets none, and one WARNING for each sender and version.
The rules are those a batch run uses (``volume_violations.judge``,
``replication_rates.transform``): a streaming DataFrame refuses their windows, so the query hands each
micro-batch, a static DataFrame, to ``decide`` (foreachBatch). Nothing is kept between micro-batches but
Spark's offsets in the checkpoint: an observation carries what its rule needs (a volume's measurements in the
fill window), and a restarted query resumes after the last micro-batch it wrote.
"""
from __future__ import annotations

import json
import logging
from datetime import date, datetime, timedelta, timezone
from functools import reduce
from typing import Callable

from pyspark.sql import Column, DataFrame, SparkSession

from quota_sidecar.pipeline import messages, schema as wire
from quota_sidecar.pipeline.topics import COMPRESSION
from spark_jobs import columns, history, move_progress, replication_rates, volume_violations
from spark_jobs.schemas import OBSERVATION_SCHEMA

_log = logging.getLogger(__name__)
KINDS = wire.KINDS.names


def decisions(observations: DataFrame, aggregator: str, kinds: tuple[str, ...] = KINDS) -> DataFrame:
    """Readable observations (``readable``) → Kafka rows of decisions (``key``, ``value``: JSON): one of volumes
    gets the factor and its volumes judged, one of replication rows their rates, moves and destinations.
    Only the rules of `kinds` (one at least: those a micro-batch holds) are planned: planning a rule costs a
    micro-batch more than running it."""
    F = columns.functions(observations)
    parts = [rule(observations) for kind, rule in (("volumes", _volumes), ("replication", _replication))
             if kind in kinds]
    # No join: each part already carries its observation, and an observation is of one kind.
    decided = _decided(F, aggregator)
    key = F.concat(F.col("observation.cluster"), F.lit("/"), F.coalesce(F.col("observation.agent").cast("string"),
                                                                       F.lit("")))
    # Null fields too: an agent reads every column of a rule's rows by name.
    value = F.to_json(F.struct(*(decided[name].alias(name) for name in wire.DECISION_NAMES)),
                      {"ignoreNullFields": "false"})
    return reduce(DataFrame.unionByName, parts).select(key.alias("key"), value.alias("value"))


def _decided(F, aggregator: str) -> dict[str, Column]:
    """Each field of a decision (pipeline/schema.py's DECISION_NAMES) from the row of its observation
    (``_grouped``): who asked as the observation says it, each kind's answer as its rule decided it."""
    return {"version": F.lit(messages.VERSION), "answers": F.col("observation.id"),
            **{name: F.col(f"observation.{name}") for name in wire.ASKER.without("id").names},
            "decided_at": F.date_format(F.current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
            "aggregator": F.lit(aggregator), **{kind: F.col(kind) for kind in KINDS}}


def decide(batch: DataFrame, aggregator: str, write: Callable[[DataFrame], None],
           refused: messages.Reader | None = None) -> None:
    """One micro-batch of Kafka rows of observations (``key``, ``value``, ``topic``, ``partition``, ``offset``)
    decided: its decisions (``decisions``) handed to `write`; an observation of a version this aggregator does
    not read said by `refused` (one line for each sender and version) and left out."""
    refused = refused or refusals()
    F = columns.functions(batch)
    # parsed once, read by each rule; with where the Kafka row is, for the line that refuses it
    parsed = batch.select(_parsed(F), F.col("key").cast("string").alias("key"), "topic", "partition",
                          "offset").persist()
    try:
        kinds, unknown = _survey(parsed)
        for row in unknown:
            refused.refuse(row["version"], refused.sender(row.asDict()),
                           messages.position(row["topic"], row["partition"], row["offset"]))
        if kinds:
            write(decisions(_readable(parsed), aggregator, kinds))
    finally:
        parsed.unpersist()


def refusals() -> messages.Reader:
    """What says the observations of a version this aggregator does not read (``decide``): one for a query."""
    return messages.Reader("an observation", "this aggregator", messages.from_agent)


def readable(observations: DataFrame) -> DataFrame:
    """Kafka rows of observations (``value``: JSON) → one row per observation (``schemas.OBSERVATION_SCHEMA``);
    one that is not JSON, of a version this aggregator does not read, or without an id or a cluster, is left out
    (and gets no decision). One without a version is version 1 (messages.UNSAID)."""
    return _readable(observations.select(_parsed(columns.functions(observations))))


def _parsed(F) -> Column:
    return F.from_json(F.col("value").cast("string"), OBSERVATION_SCHEMA).alias("o")


def _known_version(F) -> Column:
    return F.coalesce(F.col("o.version"), F.lit(messages.UNSAID)).isin(*messages.READABLE)


def _is_readable(F) -> Column:
    return _known_version(F) & F.col("o.id").isNotNull() & F.col("o.cluster").isNotNull()


def _readable(parsed: DataFrame) -> DataFrame:
    return parsed.where(_is_readable(columns.functions(parsed))).select("o.*")


def _survey(parsed: DataFrame) -> tuple[tuple[str, ...], list]:
    """Of parsed Kafka rows (``o``, and where each is): the kinds of the readable observations, and the sender and
    place of each of a version this aggregator does not read; one small job."""
    F = columns.functions(parsed)
    readable = _is_readable(F)
    place = F.struct(F.col("o.version").alias("version"), F.col("o.cluster").alias("cluster"),
                     F.col("o.agent").alias("agent"), "key", "topic", "partition", "offset")
    present = parsed.select(
        *(F.coalesce(F.max(readable & F.col(f"o.{kind}").isNotNull()), F.lit(False)).alias(kind) for kind in KINDS),
        F.collect_list(F.when(~_known_version(F), place)).alias("refused")).first()
    return tuple(kind for kind in KINDS if present[kind]), present["refused"]


def _volumes(observations: DataFrame) -> DataFrame:
    F = columns.functions(observations)
    volume_rows = _each_row(observations, "volumes", F.filter(F.col("volumes.rows"), lambda v: v["usable"]),
                            F.col("volumes.limits").alias("limits")).select("observation", "row.*", "limits.*")
    return _grouped(volume_violations.judge(volume_rows), "volumes", F.struct(
        volume_violations.factor(F).alias("factor"), volume_violations.judged_rows(F).alias("rows")))


def _replication(observations: DataFrame) -> DataFrame:
    F = columns.functions(observations)
    replication_rows = _each_row(observations, "replication", F.col("replication.rows")).select("observation", "row.*")
    rates = replication_rates.transform(move_progress.transform(replication_rows))
    return _grouped(rates, "replication", F.struct(*replication_rates.decision(rates)))


def _each_row(observations: DataFrame, kind: str, rows: Column, *columns_: Column) -> DataFrame:
    """A row (``row``) for each of the `rows` of the observations of `kind`, with its ``observation`` and
    `columns_`. An observation without rows keeps one row, all null, which the rules leave out of its decision:
    one whose volumes are all offline still gets a decision (factor 1.0, as in a batch run). The observations
    are spread over the shuffle partitions by observation before their rows are exploded: the rules' window and
    grouping are by observation, so that one shuffle of a row per observation serves both, not two of a row per
    volume."""
    F = columns.functions(observations)
    observation = F.struct(*(F.col(name) for name in wire.ASKER.names)).alias("observation")
    return (observations.where(F.col(kind).isNotNull())
            .select(observation, rows.alias("rows"), *columns_)
            .repartition("observation")
            .select("*", F.explode_outer("rows").alias("row")).drop("rows"))


def start(spark: SparkSession, kafka_options: dict[str, str], observations_topic: str, decisions_topic: str,
          checkpoint: str, aggregator: str, starting_offsets: dict[int, int]):
    """The streaming query, started: each micro-batch's decisions written to ``decisions_topic``.

    ``kafka_options`` are the pipeline cluster's client properties as the Java client names them
    (bootstrap.servers, security.protocol...). A first start reads from ``starting_offsets`` ({partition:
    offset}, the topic's end when it starts: older observations are too old to act on); a restart resumes
    from its checkpoint.
    """
    options = {f"kafka.{name}": value for name, value in kafka_options.items()}

    def write(decided: DataFrame) -> None:
        # acks=1: a decision waits for no follower (whose fetches cross the links a move fills); one lost
        # with its leader is asked again at the agent's next pass.
        (decided.write.format("kafka").options(**options).option("kafka.acks", "1")
         .option("kafka.compression.type", COMPRESSION).option("topic", decisions_topic).save())

    # A micro-batch fetches offsets it knows are there; the consumer's next fetch, sent ahead, would otherwise
    # wait 500 ms at the broker for data: half the decision's latency.
    source = _observations(spark, options, observations_topic, starting_offsets).option("kafka.fetch.max.wait.ms", "10")
    refused = refusals()
    return (source.load().writeStream.foreachBatch(lambda batch, _id: decide(batch, aggregator, write, refused))
            .option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds").queryName("quota-sidecar-aggregation").start())


# The history is written by a query of its own, every history.interval, not in the decisions' micro-batches: a
# Parquet write there (seconds on busy cores) would hold up the next decision (a micro-batch ends when its writes
# do; with local[1] the history's one task still takes the core from a decision once an interval), and a micro-batch
# every second would leave thousands of tiny files a day in each partition. Each query keeps its own offsets.


def record_history(batch: DataFrame, location: str, retention: timedelta, expired: dict) -> None:
    """One micro-batch of Kafka rows appended to the history at ``location``; the days older than ``retention``
    deleted once a day (``expired`` remembers the last day it was done)."""
    history.append(history.transform(readable(batch)), location)
    today = datetime.now(timezone.utc).date()
    if expired.get("day") != today:
        expired["day"] = today  # tried once a day: a failure is said, and the appends go on
        try:
            for folder in history.expire(batch.sparkSession, location, retention, today):
                _log.info("history: deleted %s, older than %s", folder, retention)
        except Exception as error:  # a history it cannot list or delete from; the next day tries again
            _log.warning("history: cannot delete the days older than %s at %s: %s", retention, location,
                         str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__)


def start_history(spark: SparkSession, kafka_options: dict[str, str], observations_topic: str, checkpoint: str,
                  location: str, retention: timedelta, interval: timedelta, starting_offsets: dict[int, int]):
    """The history's streaming query (``history.location``): the same observations as ``start`` reads, appended
    to the history every ``interval``, with its checkpoint at ``checkpoint``."""
    options = {f"kafka.{name}": value for name, value in kafka_options.items()}
    expired: dict[str, date] = {}
    source = _observations(spark, options, observations_topic, starting_offsets).load()
    return (source.writeStream.foreachBatch(lambda batch, _id: record_history(batch, location, retention, expired))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{interval.total_seconds():g} seconds")
            .queryName("quota-sidecar-history").start())


def _observations(spark: SparkSession, options: dict[str, str], topic: str, starting_offsets: dict[int, int]):
    """The Kafka source of the observations topic (not loaded yet), from ``starting_offsets`` on a first start."""
    return (spark.readStream.format("kafka").options(**options).option("subscribe", topic)
            .option("startingOffsets", json.dumps({topic: {
                str(partition): offset for partition, offset in starting_offsets.items()}}))
            .option("failOnDataLoss", "false"))  # observations deleted by retention while it was down


def _grouped(df: DataFrame, kind: str, decided: Column) -> DataFrame:
    """``df`` grouped by observation: the observation, the `decided` aggregate as column `kind` and null as the
    other kind's."""
    other = "replication" if kind == "volumes" else "volumes"
    return df.groupBy("observation").agg(decided.alias(kind), columns.functions(df).lit(None).alias(other))
