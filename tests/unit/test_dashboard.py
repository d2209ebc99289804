"""The chart's Grafana dashboard and alert rules read only metrics the agents (quota_sidecar/serve/metrics.py) and
the aggregator (spark_jobs/capacity_metrics.py) export."""

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from quota_sidecar.common.refusals import Refusal
from quota_sidecar.serve.metrics import registry_for
from spark_jobs.capacity_metrics import CapacityForecast

CHART_FILES = Path(__file__).resolve().parents[2] / "charts" / "quota-sidecar" / "files"
METRIC = re.compile(r"\bquota_sidecar_[a-z_]+\b")


def exported(snapshot) -> set[str]:
    """Every sample name a scrape shows: of an agent's snapshot with every part (replication, forecast), and of the
    aggregator's endpoint with a forecast of one volume."""
    forecast = CapacityForecast("/history", None)
    forecast.volumes = [{"cluster": "c", "broker": 1, "log_dir": "/data", "limit_at": None, "growth_bytes_per_day": 0}]
    aggregator = CollectorRegistry()
    aggregator.register(forecast)
    text = generate_latest(registry_for(lambda: snapshot)).decode() + generate_latest(aggregator).decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def dashboard_queries() -> dict[str, list[str]]:
    dashboard = json.loads((CHART_FILES / "dashboard.json").read_text())
    queries = {panel["title"]: [target["expr"] for target in panel["targets"]] for panel in dashboard["panels"]}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries[f"variable {variable['name']}"] = [variable["query"]]
    return queries


def rule_expressions() -> dict[str, list[str]]:
    groups = yaml.safe_load((CHART_FILES / "alerts.yaml").read_text())["groups"]
    return {rule["alert"]: [rule["expr"]] for group in groups for rule in group["rules"]}


@pytest.mark.parametrize("source", [dashboard_queries, rule_expressions], ids=["dashboard", "alerts"])
def test_every_metric_used_is_exported(a_snapshot, source):
    refused = Refusal("ALTER_CONFIGS on CLUSTER", "ALTER_CONFIGS on CLUSTER refused for User:quota-sidecar (...)", 1, 0.0)
    names = exported(a_snapshot(replication=True, refused=(refused,)))

    used = {where: set(METRIC.findall(" ".join(queries))) for where, queries in source().items()}

    assert not {where for where, metrics in used.items() if not metrics}, "a panel or rule that reads no sidecar metric"
    unknown = {where: sorted(metrics - names) for where, metrics in used.items() if metrics - names}
    assert unknown == {}


def test_the_dashboard_shows_what_the_issue_asks_for():
    shown = set(METRIC.findall(json.dumps(dashboard_queries())))

    assert {"quota_sidecar_throttle_factor", "quota_sidecar_throttle_factor_source",
            "quota_sidecar_volume_available_bytes", "quota_sidecar_volume_seconds_to_limit",
            "quota_sidecar_client_quota", "quota_sidecar_replication_throttle_rate_bytes",
            "quota_sidecar_moves_in_progress", "quota_sidecar_volume_days_to_limit"} <= shown
