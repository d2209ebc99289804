"""The chart's alerts on a real Prometheus (Debian's prometheus package) scraping a real sidecar: a volume
violates the limit on a local Kafka cluster, the sidecar throttles, QuotaSidecarThrottleEngaged fires.
make test-chart."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from harness.spark.aggregator import Aggregator
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.cluster.ports import free_loopback_ports
from harness.agents.sidecar_process import SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX

pytestmark = pytest.mark.chart
ALERTS = Path(__file__).resolve().parents[2] / "charts" / "quota-sidecar" / "files" / "alerts.yaml"


def firing(prometheus_url: str) -> dict[str, dict]:
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/alerts", timeout=5) as response:
        alerts = json.load(response)["data"]["alerts"]
    return {alert["labels"]["alertname"]: alert for alert in alerts if alert["state"] == "firing"}


def test_the_throttle_alert_fires_on_a_real_violation(tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus server: Debian's prometheus package has it (make test-chart installs it as root)")
    with LocalKafkaCluster(brokers=1) as cluster:
        properties = {f"{PREFIX}kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
                      f"{PREFIX}storage.check.interval": "PT2S",
                      f"{PREFIX}storage.per.volume.limit.min.available.bytes": 10 ** 18}  # every volume violates
        # The agent's pipeline is the cluster it watches (its default), where this aggregator reads.
        with Aggregator(cluster.bootstrap_servers, tmp_path / "aggregator"), \
                SidecarProcess("alerting", tmp_path, properties) as sidecar:
            prometheus_port, = free_loopback_ports(1)
            config = tmp_path / "prometheus.yml"
            config.write_text(json.dumps({  # YAML is a superset of JSON
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(ALERTS)],
                "scrape_configs": [{"job_name": "quota-sidecar",
                                    "static_configs": [{"targets": [f"{sidecar.host}:{sidecar.port}"]}]}]}))
            log = open(tmp_path / "prometheus.log", "w")
            prometheus = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prometheus_port}"], stdout=log, stderr=subprocess.STDOUT)
            try:
                url = f"http://127.0.0.1:{prometheus_port}"
                try:
                    alert = eventually(lambda: firing(url).get("QuotaSidecarThrottleEngaged"), timeout=300,
                                       what="QuotaSidecarThrottleEngaged firing", every=2, retry_on=(OSError,))
                except AssertionError as error:
                    raise AssertionError(f"{error}\n{(tmp_path / 'prometheus.log').read_text()[-2000:]}") from None
                assert alert["labels"] == {"alertname": "QuotaSidecarThrottleEngaged", "job": "quota-sidecar",
                                           "severity": "critical"}
                assert alert["annotations"]["summary"] == "Producers are throttled (factor 0)."
                assert "QuotaSidecarNotPolling" not in firing(url)  # it polls
            finally:
                prometheus.terminate()
                prometheus.wait(timeout=30)
                log.close()
