"""The storage limit's verdict is written twice: in Python for the agent's local verdict (observe/volumes.py, as
the local watch and the cover watch call it) and in Spark SQL for the aggregator (spark_jobs/volume_violations.py).
Both are fed the same random histories of a volume here and must agree: at the limit or not, violated, predicted,
the fill rate and the time to the limit. Otherwise the local disk guard and the cluster's factor disagree.

Hypothesis draws batches of histories, each batch one DataFrame and one Spark job (a job a history would take
minutes); a history is three drawn choices (its size, its limit, a seed for the rest) so that a batch fits the
data Hypothesis draws per example.
"""
import math
import random
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import StringType, StructField, StructType

from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.observe.volumes import (LocalSample, at_the_limit, fill_rate, predicted, seconds_to_limit,
                                           time_left)
from spark_jobs import volume_violations
from spark_jobs.schemas import LIMITS_SCHEMA, VOLUME_SCHEMA, frame_from_rows

BATCH = 500  # histories a Hypothesis example (Hypothesis refuses an example of many more drawn choices)
EXAMPLES = 20  # 10,000 histories in all
DIR = "/var/lib/kafka/data"
_ROWS = StructType([StructField("observation", StringType(), nullable=False), *VOLUME_SCHEMA.fields,
                    *LIMITS_SCHEMA.fields])

# The fill rate is a least-squares slope that the two sides sum in different orders (Python about the means, in
# two passes; Spark's regr_slope in one, updating its moments row by row) over times that differ by the agent's
# offset (monotonic seconds here, seconds before the decision there): they agree to within about 1e-12 of the
# volume's size over the samples' span (5e-13 at worst over 10,000 histories), not bit for bit; RELATIVE of it
# leaves a wide margin. The time to the limit, the margin over that rate, is as far off relatively as the rate,
# and a predicted violation that depends on it is a tie either answer is right about when it lies within that
# of the lead time, or the rate within it of 0. Whether a volume is at the limit now takes no slope: exactly.
RELATIVE = 1e-9


@st.composite
def histories(draw) -> dict:
    """A volume's capacity, limit and samples: the limit in bytes or as a ratio (in thousandths, as operators write
    it), a lead time or none, and a seed for the rest (the limit's kind, the lead time, random intervals, fill
    rates, noise, and a newest sample near the limit one time in two). Three choices a history: a batch of them is
    one example."""
    total = draw(st.integers(0, 2**44))
    thousandths = draw(st.integers(0, 1000))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    if rng.random() < 0.5:  # a size in thousands, so that a ratio in thousandths of it is a whole number of bytes
        total -= total % 1000
    lead = timedelta(seconds=rng.choice((0, rng.randint(1, 600))))
    if rng.random() < 0.5:
        limit = StorageLimit(min_available_bytes=round(total * thousandths / 1000), lead_time=lead)
    else:
        limit = StorageLimit(min_available_ratio=thousandths / 1000, lead_time=lead)
    return {"limit": limit, "total": total, **_samples(rng, total, limit)}


def _samples(rng: random.Random, total: int, limit: StorageLimit) -> dict:
    """Times (monotonic seconds, strictly increasing at irregular intervals) and available bytes, oldest first."""
    n = rng.choice((1, 2, 3, rng.randint(4, 30)))
    pace = rng.choice((0.01, 0.1, 1.0, 10.0))
    at = [rng.uniform(0.0, 1e6)]
    for _ in range(n - 1):
        at.append(at[-1] + pace * rng.choice((1.0, rng.uniform(0.001, 1.0), rng.expovariate(1.0), 50.0)))
    rate = rng.choice((0.0, 0.0, 1.0, -1.0)) * total * rng.choice((1e-6, 1e-3, 0.05)) / pace  # bytes/s filled
    noise = rng.choice((0.0, 1e-6, 1e-3)) * total
    available = rng.uniform(0, total)
    values = [min(max(round(available - rate * (t - at[-1]) + rng.gauss(0.0, noise)), 0), total) for t in at]
    if rng.random() < 0.5:  # the newest sample at the limit, or a byte either side of it
        boundary = limit.min_available_bytes if limit.min_available_bytes is not None \
            else round(limit.min_available_ratio * total)
        values[-1] = min(max(boundary + rng.choice((-1, 0, 0, 1)), 0), total)
    return {"at": at, "available": values, "now": at[-1] + rng.choice((0.0, rng.uniform(0.0, 2.0)))}


def python_verdict(history: dict) -> dict:
    """The local verdict's judgement of one dir whose samples all lie in the fill window, through the functions
    the local watch and the cover watch call."""
    limit = history["limit"]
    samples = [LocalSample(DIR, at, history["total"], available)
               for at, available in zip(history["at"], history["available"])]
    at_limit = DIR in at_the_limit(time_left({DIR: samples}, limit))
    was_predicted = DIR in predicted({DIR: samples}, limit)
    fill = fill_rate(samples)
    return {"at_limit": at_limit, "violated": at_limit or was_predicted, "predicted": was_predicted,
            "fill_bytes_per_sec": fill, "seconds_to_limit": seconds_to_limit(samples, limit, fill)}


def spark_verdicts(spark, batch: list[dict]) -> list[dict]:
    """The aggregator's rule (volume_violations.judge) on every history of the batch at once, one observation each
    with its own limits, the rows' times relative to the decision's as the agent sends them."""
    rows = [{"observation": str(index), "broker_id": 1, "log_dir": DIR, "total_bytes": history["total"],
             "available_bytes": available, "usable": True, "at_seconds": at - history["now"],
             **{name: history["limit"].as_params().get(name) for name in volume_violations.LIMIT_COLUMNS}}
            for index, history in enumerate(batch) for at, available in zip(history["at"], history["available"])]
    judged = volume_violations.judge(frame_from_rows(spark, rows, _ROWS)).collect()
    by_observation = {int(row["observation"]): row.asDict() for row in judged}
    return [by_observation[index] for index in range(len(batch))]


def disagreements(history: dict, spark_row: dict) -> list[str]:
    """What the two sides judge differently, beyond the float tolerance (RELATIVE); none when they agree."""
    ours = python_verdict(history)
    at_limit = spark_row["violated"] and not spark_row["predicted"]
    found = []
    if ours["at_limit"] != at_limit:
        found.append(f"at the limit: Python {ours['at_limit']}, Spark {at_limit}")
    # The slope's rounding, in bytes/s: a fill rate within it of 0 may be filling on one side and not the other.
    rounding = RELATIVE * max(history["total"], 1) / max(history["at"][-1] - history["at"][0], 1e-3)
    fill = ours["fill_bytes_per_sec"]
    if not _close(fill, spark_row["fill_bytes_per_sec"], RELATIVE, rounding):
        found.append(f"fill rate: Python {fill!r}, Spark {spark_row['fill_bytes_per_sec']!r}")
    steady = fill is not None and abs(fill) <= rounding
    # the time to the limit is the margin over the fill rate: as far off, relatively, as the rate
    relative = RELATIVE + rounding / abs(fill) if fill else RELATIVE
    if not (steady and not ours["at_limit"]) \
            and not _close(ours["seconds_to_limit"], spark_row["seconds_to_limit"], relative, 0.0):
        found.append(f"seconds to the limit: Python {ours['seconds_to_limit']!r}, "
                     f"Spark {spark_row['seconds_to_limit']!r}")
    lead = history["limit"].lead_time.total_seconds()
    tie = steady or _close(ours["seconds_to_limit"], lead, relative, 0.0)
    for verdict in ("violated", "predicted"):
        if not (tie and not ours["at_limit"]) and ours[verdict] != spark_row[verdict]:
            found.append(f"{verdict}: Python {ours[verdict]}, Spark {spark_row[verdict]}")
    return found


def _close(a: float | None, b: float | None, relative: float, absolute: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=relative, abs_tol=absolute)


def _described(history: dict) -> str:
    return (f"limit {history['limit'].describe()}, total {history['total']} bytes, samples (at, available) "
            f"{list(zip(history['at'], history['available']))}, now {history['now']!r}")


@pytest.fixture(scope="module")
def timed():
    """Prints how long the module's histories took (pytest -s shows it)."""
    started = time.monotonic()
    yield
    print(f"\n{EXAMPLES} x {BATCH} histories judged by both sides in {time.monotonic() - started:.1f}s")


# A failing batch is not shrunk (each try a Spark job; its message names the first history judged apart), nor
# printed whole (a quarter of a megabyte).
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_python_and_spark_judge_the_same_histories_alike(spark, timed):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(st.lists(histories(), min_size=BATCH, max_size=BATCH))
    def judged_alike(batch):
        found = [(history, problems) for history, row in zip(batch, spark_verdicts(spark, batch))
                 if (problems := disagreements(history, row))]
        assert not found, (f"{len(found)} of {len(batch)} histories judged differently; the first: "
                           f"{_described(found[0][0])}: {'; '.join(found[0][1])}")

    judged_alike()
