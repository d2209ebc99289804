"""Least privilege (issue 22): an agent and the aggregator on a cluster with Kafka's StandardAuthorizer, over
SCRAM-SHA-512 and TLS (tests/harness/secure_lab.py), their pipeline on that cluster, each principal granted exactly
the ACLs `quota-sidecar acls` prints for it and nothing more: disk protection, cordons, status and clean-up work,
and nothing is refused.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.aggregator import Aggregator
from harness.secure_lab import SecureLab, grant
from harness.sidecar_process import EXECUTABLE, SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import ADMIN_PREFIX, PREFIX
from quota_sidecar.decide.cordons import KEY as CORDONED_LOG_DIRS
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.observe.admin import ClusterAdmin

pytestmark = [pytest.mark.integration]

AGENT, AGGREGATOR = "quota-sidecar", "quota-sidecar-aggregator"
PASSWORDS = {AGENT: "s3cret-agent", AGGREGATOR: "s3cret-aggregator"}


def granted(process: SidecarProcess, principal: str, processes: str, lab_bootstrap: str) -> int:
    """The ACLs `quota-sidecar acls` prints for what `process` runs, created as the lab's super user."""
    printed = subprocess.run([str(EXECUTABLE), "acls", "--principal", f"User:{principal}", "--for", processes,
                              "--config", str(process.config_path), "--json"], capture_output=True, text=True,
                             timeout=60)
    assert printed.returncode == 0, printed.stderr
    return grant(lab_bootstrap, json.loads(printed.stdout))


def test_with_exactly_the_printed_acls_the_agent_and_aggregator_throttle_cordon_show_and_clean_up(
        make_kafka_cluster, tmp_path):
    security = SecureLab(tmp_path / "tls", scram_users=PASSWORDS)
    cluster = make_kafka_cluster(brokers=1, security=security)
    secure = cluster.secure_bootstrap_servers()
    # The agent as a Python client names its CA file; the aggregator's Java clients a PEM truststore.
    agent_client = security.sasl_ssl_properties(secure, AGENT)
    aggregator_client = security.java_client_properties(secure, AGGREGATOR)
    aggregator = Aggregator(secure, tmp_path / "aggregator",
                            **{ADMIN_PREFIX + key: value for key, value in aggregator_client.items()})
    agent = SidecarProcess("least-privilege", tmp_path, {
        **{PREFIX + ADMIN_PREFIX + key: value for key, value in agent_client.items()},
        PREFIX + "storage.per.volume.limit.min.available.ratio": "1.0",  # every volume violates
        PREFIX + "storage.check.interval": "PT2S", PREFIX + "broker.id": "1",
        # The aggregator's writes are no client's: a principal of its own is never throttled, as the README says.
        PREFIX + "excluded.principal.name.list": f"User:{AGGREGATOR}"})
    assert granted(aggregator.process, AGGREGATOR, "aggregate", cluster.bootstrap_servers) > 0
    assert granted(agent, AGENT, "run,cleanup", cluster.bootstrap_servers) > 0

    lab = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})  # the super user, to check
    try:
        aggregator.start().wait_ready()
        agent.start(cleanup=True).wait_ready()
        eventually(lambda: lab.describe_user_quotas([None])[None].get(PRODUCE) == 1.0, 120, "the throttle written")
        (log_dir,) = cluster.log_dirs(1)
        eventually(lambda: lab.describe_configs("broker", [1], [CORDONED_LOG_DIRS])["1"].get(CORDONED_LOG_DIRS)
                   == log_dir, 60, "the violating dir cordoned")
        status = agent.status()
        assert status["throttle"]["factor"] == 0.0 and status["throttle"]["last_error"] is None, status
        assert agent.stop() == 0  # --cleanup
        assert lab.describe_user_quotas([None])[None] == {}
        assert not lab.describe_configs("broker", [1], [CORDONED_LOG_DIRS])["1"].get(CORDONED_LOG_DIRS)
        for process in (agent, aggregator.process):
            logged = process.log_path.read_text()
            assert "AUTHORIZATION" not in logged.upper() and "Traceback" not in logged, process.log_tail()
            assert not any(password in logged for password in PASSWORDS.values())
    finally:
        agent.stop()
        aggregator.stop()
        lab.close()
