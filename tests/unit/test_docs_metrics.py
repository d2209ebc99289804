"""docs/metrics.md names every metric the agents and the aggregator export and every alert of the chart, so that
its tables cannot drift from the code."""

import re
from datetime import timedelta
from pathlib import Path

import pytest

from quota_sidecar.common.refusals import Refusal

from builders import AT
from test_dashboard import exported, rule_expressions

ROOT = Path(__file__).resolve().parents[2]
METRICS_PAGE = ROOT / "docs" / "metrics.md"
# Where the families are made: the agent's collector, its HTTP endpoint's refusals, the aggregator's forecast.
SOURCES = ("quota_sidecar/serve/metrics.py", "quota_sidecar/serve/http_api.py", "spark_jobs/capacity_metrics.py")
FAMILY = re.compile(r'(Gauge|Counter)MetricFamily\(\s*f?"(?:\{NAMESPACE\}|quota_sidecar)_(\w+)"')
HELPER = re.compile(r'_(gauge|counter)\(\s*"(\w+)"')


def documented() -> set[str]:
    """The names in the first column of the page's tables."""
    return set(re.findall(r"^\| `([A-Za-z_]+)` \|", METRICS_PAGE.read_text(), re.MULTILINE))


def in_the_source() -> set[str]:
    """Every family the source files make, as a scrape names it (counters with `_total`)."""
    names = set()
    for path in SOURCES:
        text = (ROOT / path).read_text()
        for kind, name in FAMILY.findall(text) + HELPER.findall(text):
            names.add(f"quota_sidecar_{name}" + ("_total" if kind.lower() == "counter" else ""))
    return names


def test_every_metric_in_the_source_is_in_the_table():
    names = in_the_source()

    assert len(names) > 30, "the patterns no longer find the metric families"
    assert sorted(names - documented()) == []


def test_every_metric_a_scrape_shows_is_in_the_table(a_snapshot):
    refused = Refusal("ALTER_CONFIGS on CLUSTER", "ALTER_CONFIGS on CLUSTER refused for User:quota-sidecar (...)", 1, 0.0)
    aggregation = {"observed_at": AT.isoformat(), "decided_at": (AT + timedelta(seconds=0.4)).isoformat()}
    scraped = exported(a_snapshot(replication=True, refused=(refused,), last_aggregation=aggregation))

    assert "quota_sidecar_pipeline_lag_seconds" in scraped
    assert sorted(scraped - documented()) == []


def test_the_table_names_no_metric_that_is_not_exported():
    metrics = {name for name in documented() if name.startswith("quota_sidecar_")}

    assert sorted(metrics - in_the_source()) == []


@pytest.mark.parametrize("alert", sorted(rule_expressions()))
def test_every_alert_is_in_the_table(alert):
    assert alert in documented()


def test_the_table_names_no_alert_the_chart_does_not_ship():
    alerts = {name for name in documented() if name.startswith("QuotaSidecar")}

    assert sorted(alerts - set(rule_expressions())) == []
