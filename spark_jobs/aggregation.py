"""The aggregator: one Spark Structured Streaming query that decides for every agent of every cluster.

Kafka source (the observations topic) → each micro-batch → Kafka sink (the decisions topic). A micro-batch
holds the observations of any number of agents and clusters; the rules judge them all in one job each,
grouped by observation, and every observation gets one decision under its agent's key
(quota_sidecar.pipeline_messages). The rules are those a batch run uses (``volume_violations.judge``,
``replication_rates.transform``): a streaming DataFrame refuses their windows, so the query hands each
micro-batch, a static DataFrame, to ``decisions`` (foreachBatch). Nothing is kept between micro-batches but
Spark's offsets in the checkpoint: an observation carries what its rule needs (a volume's measurements in the
fill window), and a restarted query resumes after the last micro-batch it wrote.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from quota_sidecar.pipeline_messages import VERSION
from spark_jobs import move_progress, replication_rates, volume_violations
from spark_jobs.schemas import OBSERVATION_SCHEMA

_PARSED = f"from_json(CAST(value AS STRING), '{OBSERVATION_SCHEMA.simpleString()}') AS o"
# Null fields too: an agent reads every column of a rule's rows by name.
_JSON = "to_json(struct(*), map('ignoreNullFields', 'false'))"


def decisions(observations: DataFrame, aggregator: str) -> DataFrame:
    """Kafka rows of observations (``value``: JSON) → Kafka rows of decisions (``key``, ``value``: JSON).
    An observation that is not JSON of this version, or has no id or cluster, gets none."""
    parsed = observations.selectExpr(_PARSED).where(
        f"o.version = {VERSION} AND o.id IS NOT NULL AND o.cluster IS NOT NULL").selectExpr("o.*")
    volume_rows = parsed.where("volumes IS NOT NULL").selectExpr(
        "id AS observation", "volumes.limits AS limits", "explode(volumes.rows) AS v"
    ).selectExpr("observation", "v.*", "limits.*")
    factors = _grouped(volume_violations.judge(volume_rows), "volumes",
                       f"{volume_violations.FACTOR} AS factor", f"{volume_violations.JUDGED_ROWS} AS rows")
    replication_rows = parsed.where("replication IS NOT NULL").selectExpr(
        "id AS observation", "explode(replication.rows) AS r").selectExpr("observation", "r.*")
    rates = _grouped(replication_rates.transform(move_progress.transform(replication_rows)), "rates",
                     *replication_rates.DECISION)
    answered = (parsed.join(factors, parsed.id == factors.observation, "left")
                .drop("observation")
                .join(rates, parsed.id == rates.observation, "left"))
    # An observation whose volumes are all offline has no row to judge: factor 1.0, as in a batch run.
    return answered.selectExpr(
        "concat(cluster, '/', coalesce(CAST(agent AS STRING), '')) AS key",
        f"""to_json(named_struct(
            'version', {VERSION}, 'answers', id, 'cluster', cluster, 'agent', agent,
                'observed_at', observed_at, 'decided_at', date_format(current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
                'aggregator', '{_quoted(aggregator)}',
                'volumes', CASE WHEN volumes IS NOT NULL THEN named_struct(
                    'factor', coalesce(factor, 1.0D), 'rows', coalesce(rows, array())) END,
                'replication', CASE WHEN replication IS NOT NULL THEN named_struct(
                    'rates', coalesce(rates, array()), 'moves', coalesce(moves, array()),
                    'destinations', coalesce(destinations, array())) END
            ), map('ignoreNullFields', 'false')) AS value""",
    )


def start(spark: SparkSession, kafka_options: dict[str, str], observations_topic: str, decisions_topic: str,
          checkpoint: str, aggregator: str):
    """The streaming query, started: each micro-batch's decisions written to ``decisions_topic``.

    ``kafka_options`` are the pipeline cluster's client properties as the Java client names them
    (bootstrap.servers, security.protocol...). A first start reads from the end of the topic: observations
    published before it are too old to act on; a restart resumes from its checkpoint.
    """
    options = {f"kafka.{name}": value for name, value in kafka_options.items()}

    def write(batch: DataFrame, _batch_id: int) -> None:
        batch.persist()  # read by each rule, not fetched from Kafka once per rule
        try:
            (decisions(batch, aggregator).write.format("kafka").options(**options)
             .option("topic", decisions_topic).save())
        finally:
            batch.unpersist()

    source = (spark.readStream.format("kafka").options(**options)
              .option("subscribe", observations_topic)
              .option("startingOffsets", "latest")
              .option("failOnDataLoss", "false")  # observations deleted by retention while it was down
              .load())
    return (source.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds").queryName("quota-sidecar-aggregation").start())


def _grouped(df: DataFrame, name: str, *aggregates: str) -> DataFrame:
    """``df`` grouped by observation, with the aggregates (SQL text): through a view, so that the same text
    serves classic and Connect DataFrames (pyspark.sql.functions picks one kind for the whole process)."""
    view = f"quota_sidecar_{name}"
    df.createOrReplaceTempView(view)
    return df.sparkSession.sql(f"SELECT observation, {', '.join(aggregates)} FROM {view} GROUP BY observation")


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
