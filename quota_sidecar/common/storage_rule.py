"""The storage limit's verdict on a volume, written once and read twice: evaluated in Python on one volume (the
agent's local verdict, through StorageLimit) and rendered as Spark columns over rows (the aggregator's,
spark_jobs/volume_violations.py), so that the local disk guard and the cluster's factor cannot judge apart.

A term is an expression over a row's columns: the volume's newest measurement, its fill rate, and the limits as
StorageLimit.as_params names them. Python evaluates it with SQL's nulls: None for NULL, an operation on NULL is
NULL, CASE takes a NULL condition as false. Spark gets it as a Column built with the `functions` module it is
handed (pyspark.sql.functions, or Spark Connect's: spark_jobs.columns picks the one of a DataFrame), so that the
agent never imports pyspark. A named term renders as a reference to its name, for a projection that defines the
terms in order (Spark's lateral column aliases, JUDGED); `inline` spells it out where there are none.
The fill rate itself is not a term: a window (regr_slope) computes it in Spark, a least-squares sum in the agent,
and tests/spark/test_storage_rule_agreement.py holds the two together.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Mapping

Row = Mapping[str, object]
# A rendering: the functions module, whether named terms are spelled out, and columns put in place of some names.
Render = Callable[[Any, bool, Mapping[str, Any]], Any]


class Term:
    """An expression over a row's columns with two renderings: `of(row)` in Python and `column(functions)` for
    Spark."""

    def __init__(self, render: Render, evaluate: Callable[[Row], object], name: str | None = None):
        self._render, self._evaluate, self.name = render, evaluate, name
        self._inner: Term | None = None  # a named term's expression

    def column(self, functions):
        """A Spark Column over the row's columns, a named term by its name (a lateral column alias)."""
        return self._render(functions, False, {})

    def definition(self, functions):
        """The Column of a named term's expression, for its alias in a projection."""
        return (self if self._inner is None else self._inner).column(functions)

    def inline(self, functions, columns: Mapping[str, Any] | None = None):
        """A Spark Column with every named term spelled out, and the `columns` given (name -> Column) in place of
        theirs."""
        return self._render(functions, True, columns or {})

    def of(self, row: Row) -> object:
        """The term's value on one row; a named term already in the row is read from it."""
        if self.name and self.name in row:
            return row[self.name]
        return self._evaluate(row)

    # SQL's arithmetic and comparisons, NULL when either side is
    def __add__(self, other): return _binary(self, other, operator.add)
    def __sub__(self, other): return _binary(self, other, operator.sub)
    def __rsub__(self, other): return _binary(other, self, operator.sub)
    def __mul__(self, other): return _binary(self, other, operator.mul)
    def __truediv__(self, other): return _binary(self, other, operator.truediv)
    def __le__(self, other): return _binary(self, other, operator.le)
    def __lt__(self, other): return _binary(self, other, operator.lt)
    def __ge__(self, other): return _binary(self, other, operator.ge)
    def __gt__(self, other): return _binary(self, other, operator.gt)

    def __and__(self, other):  # SQL's three-valued AND: false wins over NULL
        other = _term(other)
        return Term(lambda f, inline, cols: self._render(f, inline, cols) & other._render(f, inline, cols),
                    lambda row: _and(self.of(row), other.of(row)))

    def __or__(self, other):  # and true over NULL
        other = _term(other)
        return Term(lambda f, inline, cols: self._render(f, inline, cols) | other._render(f, inline, cols),
                    lambda row: _or(self.of(row), other.of(row)))

    def __invert__(self):
        return Term(lambda f, inline, cols: ~self._render(f, inline, cols),
                    lambda row: None if (value := self.of(row)) is None else not value)

    def is_null(self) -> Term:
        return Term(lambda f, inline, cols: self._render(f, inline, cols).isNull(), lambda row: self.of(row) is None)

    def is_not_null(self) -> Term:
        return Term(lambda f, inline, cols: self._render(f, inline, cols).isNotNull(),
                    lambda row: self.of(row) is not None)

    def double(self) -> Term:
        return Term(lambda f, inline, cols: self._render(f, inline, cols).cast("double"),
                    lambda row: None if (value := self.of(row)) is None else float(value))

    def named(self, name: str) -> Term:
        term = Term(lambda f, inline, cols: self._render(f, inline, cols) if inline else f.col(name),
                    self._evaluate, name)
        term._inner = self
        return term


def column(name: str) -> Term:
    return Term(lambda f, inline, cols: cols[name] if name in cols else f.col(name), lambda row: row.get(name))


def literal(value: object) -> Term:
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"no Spark literal for {value!r}")
    return Term(lambda f, inline, cols: f.lit(value), lambda row: value)


def coalesce(*terms) -> Term:
    terms = [_term(t) for t in terms]
    return Term(lambda f, inline, cols: f.coalesce(*(t._render(f, inline, cols) for t in terms)),
                lambda row: next((value for t in terms if (value := t.of(row)) is not None), None))


def greatest(*terms) -> Term:
    """The largest value that is not NULL, as Spark's greatest."""
    terms = [_term(t) for t in terms]
    return Term(lambda f, inline, cols: f.greatest(*(t._render(f, inline, cols) for t in terms)),
                lambda row: max((v for t in terms if (v := t.of(row)) is not None), default=None))


def when(condition, value) -> Case:
    """SQL's CASE WHEN: when(c, v).when(c2, v2).otherwise(v3), or .end for NULL when no condition holds."""
    return Case(((_term(condition), _term(value)),))


class Case:
    """The value of the first condition that is true (not false, not NULL). Only that branch is evaluated, as in
    Spark: a guarded division is never made."""

    def __init__(self, branches: tuple[tuple[Term, Term], ...]):
        self.branches = branches

    def when(self, condition, value) -> Case:
        return Case((*self.branches, (_term(condition), _term(value))))

    def otherwise(self, value) -> Term:
        return self._case(_term(value))

    @property
    def end(self) -> Term:
        return self._case(None)

    def _case(self, otherwise: Term | None) -> Term:
        branches = self.branches

        def render(f, inline: bool, cols: Mapping[str, Any]):
            case = f
            for condition, value in branches:
                case = case.when(condition._render(f, inline, cols), value._render(f, inline, cols))
            return case if otherwise is None else case.otherwise(otherwise._render(f, inline, cols))

        def evaluate(row: Row) -> object:
            for condition, value in branches:
                if condition.of(row) is True:
                    return value.of(row)
            return None if otherwise is None else otherwise.of(row)

        return Term(render, evaluate)


def _term(value) -> Term:
    return value if isinstance(value, Term) else literal(value)


def _binary(left, right, apply: Callable) -> Term:
    """`apply` (an operator) on both sides: Spark's Column operators render it, Python's evaluate it."""
    left, right = _term(left), _term(right)
    return Term(lambda f, inline, cols: apply(left._render(f, inline, cols), right._render(f, inline, cols)),
                lambda row: None if (a := left.of(row)) is None or (b := right.of(row)) is None else apply(a, b))


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


# ---------------------------------------------------------------- the rule

TOTAL, AVAILABLE, FILL = column("total_bytes"), column("available_bytes"), column("fill_bytes_per_sec")
MIN_BYTES, MIN_RATIO = column("min_available_bytes"), column("min_available_ratio")
LEAD_TIME = column("lead_time_seconds")

# The hard limit is in bytes when min_available_bytes is set, else a ratio; the soft limit and the descent's start
# are of the same kind (StorageLimit checks it).
IN_BYTES = MIN_BYTES.is_not_null()


def _in_limit_unit(in_bytes: Term, as_ratio: Term) -> Term:
    return when(IN_BYTES, in_bytes.double()).otherwise(as_ratio)


AVAILABLE_RATIO = when(TOTAL > 0, AVAILABLE / TOTAL).otherwise(0.0).named("available_ratio")
VALUE = _in_limit_unit(AVAILABLE, AVAILABLE_RATIO).named("value")  # the volume, in the limit's unit
HARD = _in_limit_unit(MIN_BYTES, MIN_RATIO).named("hard_value")
SOFT = _in_limit_unit(column("soft_min_available_bytes"), column("soft_min_available_ratio")).named("soft_value")
DESCENT = _in_limit_unit(column("descent_min_available_bytes"),
                         column("descent_min_available_ratio")).named("descent_value")
# At or below the hard limit, compared in its own unit: a ratio limit with the available ratio, as proposal 047
# words it. In bytes, 0.29 × 100 rounds above 29, and a volume at exactly 29 % would not be at a limit of 0.29.
AT_LIMIT = (VALUE <= HARD).named("at_limit")
LIMIT_BYTES = when(IN_BYTES, MIN_BYTES.double()).otherwise(MIN_RATIO * TOTAL).named("limit_bytes")
# How far above the limit, in its unit: <= 0 at the limit (whole bytes for a limit in bytes).
MARGIN = when(IN_BYTES, AVAILABLE - MIN_BYTES).otherwise(AVAILABLE_RATIO - MIN_RATIO).named("margin")
# 0 at the limit; NULL when the volume is not filling (a refilling or steady volume never gets there).
SECONDS_TO_LIMIT = when(AT_LIMIT, 0.0).when(FILL > 0.0, (AVAILABLE - LIMIT_BYTES) / FILL).end.named("seconds_to_limit")
# At the limit, or with a lead time reaching it within the lead time at the fill rate (a predicted violation).
VIOLATED = (AT_LIMIT | coalesce(SECONDS_TO_LIMIT <= coalesce(LEAD_TIME, 0.0), False)).named("violated")
PREDICTED = (VIOLATED & ~AT_LIMIT).named("predicted")
# 1.0 at or above the soft limit (or without one), falling linearly to 0.0 at the hard limit.
THROTTLE_FACTOR = (when(VIOLATED, 0.0).when(SOFT.is_null() | (VALUE >= SOFT), 1.0)
                   .otherwise((VALUE - HARD) / (SOFT - HARD)).named("throttle_factor"))
# Producer quotas go down in steps (quota_sidecar/decide/descent.py) while a volume not yet violated fills within
# the descent's start or horizon; a volume that stopped filling (room returned) lifts them. Once begun, the horizon
# is judged at the rate the descent began from (descent_rate_bytes_per_sec) when that is faster: the fill the
# throttle slowed is not the one a lift would bring back.
DESCENDING = (when(VIOLATED | (coalesce(FILL, 0.0) <= 0.0), False)
              .otherwise(coalesce((VALUE <= DESCENT) | ((AVAILABLE - LIMIT_BYTES)
                                  / greatest(FILL, coalesce(column("descent_rate_bytes_per_sec"), 0.0))
                                  <= column("descent_horizon_seconds")), False))
              .named("descending"))

# Every judged term, each defined after those it reads (a projection of them uses lateral column aliases).
JUDGED = (AVAILABLE_RATIO, VALUE, HARD, SOFT, DESCENT, AT_LIMIT, LIMIT_BYTES, SECONDS_TO_LIMIT, VIOLATED, PREDICTED,
          THROTTLE_FACTOR, DESCENDING)
# Those the agent's local verdict reads (StorageLimit.judge), and those a question of one needs.
VERDICT = (AVAILABLE_RATIO, VALUE, HARD, AT_LIMIT, LIMIT_BYTES, SECONDS_TO_LIMIT, VIOLATED, PREDICTED)
AT_LIMIT_TERMS = (AVAILABLE_RATIO, VALUE, HARD, AT_LIMIT)
MARGIN_TERMS = (AVAILABLE_RATIO, MARGIN)


# The Spark SQL types of the limits' columns (StorageLimit.as_params, and the rate a descent began from).
LIMIT_TYPES = {"min_available_bytes": "BIGINT", "min_available_ratio": "DOUBLE", "soft_min_available_bytes": "BIGINT",
               "soft_min_available_ratio": "DOUBLE", "lead_time_seconds": "DOUBLE",
               "descent_min_available_bytes": "BIGINT", "descent_min_available_ratio": "DOUBLE",
               "descent_horizon_seconds": "DOUBLE", "descent_rate_bytes_per_sec": "DOUBLE"}


def limit_columns(functions, limits: Mapping[str, object]) -> dict:
    """Each limit column of LIMIT_TYPES as a Spark literal of its type, NULL when unset: for `inline`, or a
    projection of them."""
    return {name: functions.lit(limits.get(name)).cast(kind) for name, kind in LIMIT_TYPES.items()}


def judged(row: Row, terms: tuple[Term, ...] = JUDGED) -> dict:
    """`row` with the `terms` evaluated in order, each read by those after it."""
    row = dict(row)
    for term in terms:
        row[term.name] = term.of(row)
    return row
