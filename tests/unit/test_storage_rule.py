"""The storage limit's rule, written once (quota_sidecar/common/storage_rule.py): its verdict in Python, its Spark
rendering, and the limits StorageLimit accepts. tests/spark/test_storage_rule_agreement.py runs the Spark one.
Spark Connect's functions build the columns here: they are plans, and need no session."""

import re
from datetime import timedelta

import pytest
from pyspark.sql.connect import functions as F

from quota_sidecar.common import storage_rule
from quota_sidecar.common.storage_rule import column, coalesce, when
from quota_sidecar.common.vocabulary import StorageLimit

BYTES, RATIO = StorageLimit(min_available_bytes=100), StorageLimit(min_available_ratio=0.29)
LEAD = StorageLimit(min_available_bytes=100, lead_time=timedelta(seconds=10))


@pytest.mark.parametrize("limit, available, total, fill, at_limit, violated, predicted, seconds", [
    (BYTES, 101, 1000, None, False, False, False, None),  # just above, not filling
    (BYTES, 100, 1000, None, True, True, False, 0.0),     # equal is a violation (proposal 047)
    (BYTES, 99, 1000, 5.0, True, True, False, 0.0),
    (RATIO, 29, 100, None, True, True, False, 0.0),       # exactly 29 %, though 0.29 × 100 rounds above 29
    (RATIO, 30, 100, 1.0, False, False, False, 30 - 0.29 * 100),
    (RATIO, 0, 0, None, True, True, False, 0.0),          # a volume of no size has no room
    (LEAD, 150, 1000, 5.0, False, True, True, 10.0),      # reaches the limit exactly at the lead time
    (LEAD, 151, 1000, 5.0, False, False, False, 10.2),
    (LEAD, 150, 1000, -5.0, False, False, False, None),   # refilling: never gets there
    (BYTES, 150, 1000, 5.0, False, False, False, 10.0),   # no lead time: no prediction
])
def test_the_verdict_on_a_volume(limit, available, total, fill, at_limit, violated, predicted, seconds):
    verdict = limit.judge(available, total, fill)
    assert (verdict["at_limit"], verdict["violated"], verdict["predicted"]) == (at_limit, violated, predicted)
    assert verdict["seconds_to_limit"] == (None if seconds is None else pytest.approx(seconds))


def test_the_margin_and_the_limit_in_bytes_are_in_the_limits_unit():
    assert BYTES.margin(250, 1000) == 150
    assert RATIO.margin(250, 1000) == pytest.approx(0.25 - 0.29)
    assert RATIO.limit_bytes(1000) == pytest.approx(290.0)
    assert BYTES.limit_bytes(1000) == 100.0


@pytest.mark.parametrize("fields, message", [
    ({}, "set exactly one of min_available_bytes and min_available_ratio"),
    ({"min_available_bytes": 1, "min_available_ratio": 0.1}, "set exactly one"),
    ({"min_available_bytes": 1, "soft_min_available_ratio": 0.1}, "the soft limit must be of the hard limit's kind (bytes)"),
    ({"min_available_ratio": 0.1, "descent_min_available_bytes": 5}, "the descent limit must be of the hard limit's kind (ratio)"),
])
def test_a_limit_that_is_not_one_is_refused(fields, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        StorageLimit(**fields)


def test_a_limit_comes_back_from_its_params():
    limit = StorageLimit(min_available_ratio=0.1, soft_min_available_ratio=0.2, lead_time=timedelta(seconds=30),
                         descent_min_available_ratio=0.3, descent_horizon=timedelta(minutes=2))
    assert StorageLimit.from_params(limit.as_params()) == limit


def test_each_judged_term_reads_only_the_columns_and_the_terms_before_it():
    # Spark's lateral column aliases: a term named before it is defined would read a column that is not there.
    known = {"total_bytes", "available_bytes", "fill_bytes_per_sec", *storage_rule.LIMIT_TYPES}
    for term in storage_rule.JUDGED:
        names = set(re.findall(r"\b[a-z_]+\b", str(term.definition(F)))) - {"coalesce", "greatest", "and", "or",
                                                                             "not", "isNull", "isNotNull"}
        assert names <= known, f"{term.name} reads {names - known}"
        known.add(term.name)


def test_sql_nulls_in_python():
    a, b = column("a"), column("b")
    assert (a <= b).of({"a": None, "b": 1}) is None
    assert ((a > 0) | (b > 0)).of({"a": None, "b": 1}) is True      # true wins over NULL
    assert ((a > 0) & (b > 0)).of({"a": None, "b": -1}) is False    # false wins over NULL
    assert when(a > 0, 1.0).end.of({"a": None}) is None            # a NULL condition is not true
    assert when(a > 0, 1.0).otherwise(2.0).of({"a": None}) == 2.0
    assert coalesce(a, b, 3).of({"a": None, "b": None}) == 3
    assert when(b > 0, a / b).otherwise(0.0).of({"a": 1, "b": 0}) == 0.0  # the guarded division is not made


def test_inline_spells_out_named_terms_and_binds_columns():
    limits = storage_rule.limit_columns(F, {"min_available_ratio": 0.1})
    inline = storage_rule.LIMIT_BYTES.inline(F, limits)
    assert str(inline) == ("Column<'CASE WHEN isNotNull(CAST(NULL AS BIGINT)) THEN CAST(CAST(NULL AS BIGINT) AS DOUBLE) "
                           "ELSE *(CAST(0.1 AS DOUBLE), total_bytes) END'>")
    assert str(storage_rule.PREDICTED.column(F)) == "Column<'predicted'>"
    assert str(storage_rule.PREDICTED.definition(F)) == "Column<'and(violated, not(at_limit))'>"
