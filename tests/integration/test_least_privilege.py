"""Least privilege (issue 22): an agent on a cluster with Kafka's StandardAuthorizer, over SCRAM-SHA-512 and TLS
(tests/harness/secure_lab.py), granted exactly the ACLs `quota-sidecar acls` prints for it, and nothing more:
disk protection, cordons, status and clean-up work, and nothing is refused.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.secure_lab import SecureLab, grant
from harness.sidecar_process import EXECUTABLE, SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import ADMIN_PREFIX, PREFIX
from quota_sidecar.decide.cordons import KEY as CORDONED_LOG_DIRS
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.observe.admin import ClusterAdmin

pytestmark = [pytest.mark.integration]

USER = "quota-sidecar"


def test_with_exactly_the_printed_acls_the_agent_throttles_cordons_shows_and_cleans_up(
        make_kafka_cluster, pipeline, tmp_path):
    security = SecureLab(tmp_path / "tls", scram_users={USER: "s3cret-scram"})
    cluster = make_kafka_cluster(brokers=1, security=security)
    properties = {PREFIX + ADMIN_PREFIX + key: value for key, value in
                  security.sasl_ssl_properties(cluster.secure_bootstrap_servers(), USER).items()}
    properties |= {PREFIX + "storage.per.volume.limit.min.available.ratio": "1.0",  # every volume violates
                   PREFIX + "storage.check.interval": "PT2S", PREFIX + "broker.id": "1", **pipeline}
    sidecar = SidecarProcess("least-privilege", tmp_path, properties)
    printed = subprocess.run([str(EXECUTABLE), "acls", "--principal", f"User:{USER}", "--for", "run,cleanup",
                              "--config", str(sidecar.config_path), "--json"], capture_output=True, text=True,
                             timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert grant(cluster.bootstrap_servers, json.loads(printed.stdout)) > 0

    lab = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})  # the super user, to check
    try:
        sidecar.start(cleanup=True).wait_ready()
        eventually(lambda: lab.describe_user_quotas([None])[None].get(PRODUCE) == 1.0, 60, "the throttle written")
        (log_dir,) = cluster.log_dirs(1)
        eventually(lambda: lab.describe_configs("broker", [1], [CORDONED_LOG_DIRS])["1"].get(CORDONED_LOG_DIRS)
                   == log_dir, 60, "the violating dir cordoned")
        status = sidecar.status()
        assert status["throttle"]["factor"] == 0.0 and status["throttle"]["last_error"] is None, status
        assert sidecar.stop() == 0  # --cleanup
        assert lab.describe_user_quotas([None])[None] == {}
        assert not lab.describe_configs("broker", [1], [CORDONED_LOG_DIRS])["1"].get(CORDONED_LOG_DIRS)
        logged = sidecar.log_path.read_text()
        assert "AUTHORIZATION" not in logged.upper() and "Traceback" not in logged, sidecar.log_tail()
        assert "s3cret-scram" not in logged
    finally:
        sidecar.stop()
        lab.close()
