"""Every key with a bad value, through the real command line (`quota-sidecar run --config FILE`): exit code 2,
one line on stderr naming the key, no secret in the output, and nothing started.

Keys whose values only this host can judge (a port in use, an address or interface it does not have) are
refused at start, before Spark or the cluster, with the same one line.
"""

import socket

import pytest
from click.testing import CliRunner

from quota_sidecar import wiring
from quota_sidecar.cli import main
from quota_sidecar.cli import grammar as cli_grammar
from quota_sidecar.configuration import config as cfg
from quota_sidecar.configuration.keys import KEYS

P = cfg.PREFIX
PASSWORD = "alice-pa55word"
TOKEN = "t0ken-never-shown"
PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{}";'
# A valid configuration that holds secrets; each case changes one key.
BASE = {
    "kafka.admin.bootstrap.servers": "127.0.0.1:1",
    "kafka.admin.security.protocol": "SASL_PLAINTEXT",
    "kafka.admin.sasl.mechanism": "PLAIN",
    "kafka.admin.sasl.jaas.config": PLAIN.format(PASSWORD),
    "storage.per.volume.limit.min.available.bytes": "100",
    "api.token": TOKEN,
    "http.port": "0",
}

BAD_VALUES = [  # (key, bad value, more keys the case needs)
    ("storage.per.volume.limit.min.available.bytes", "-1", {}),
    ("storage.per.volume.limit.min.available.ratio", "1.5", {}),
    ("storage.check.interval", "60", {}),
    ("storage.per.volume.soft.limit.min.available.bytes", "50", {"produce": "1000"}),  # not above the hard limit
    ("storage.per.volume.soft.limit.min.available.ratio", "0.5", {"produce": "1000"}),  # of the other kind
    ("storage.per.volume.limit.lead.time", "1 minute", {}),
    ("storage.per.volume.descent.min.available.bytes", "50", {}),  # below the hard limit
    ("storage.per.volume.descent.min.available.ratio", "0.5", {}),  # of the other kind
    ("storage.per.volume.descent.horizon", "soon", {}),
    ("storage.fill.window", "PT0S", {}),
    ("storage.cordon.log.dirs", "maybe", {}),
    ("storage.cancel.moves.at.limit", "sometimes", {}),
    ("storage.local.log.dirs", "var/lib/kafka", {}),
    ("storage.local.log.dirs", "/no/such/kafka/dir", {}),  # refused at start: not a directory of this host
    ("storage.local.watch.interval", "0.1", {}),
    ("storage.local.trigger.horizon", "PT0S", {}),
    ("poll.timeout", "PT0S", {}),
    ("cover.after", "2 seconds", {}),
    ("cover.interval", "PT0S", {}),
    ("throttle.factor.fallback", "2", {}),
    ("throttle.factor.validity.duration", "P1M", {}),
    ("produce", "0", {}),
    ("produce.floor", "0", {}),
    ("produce.descent.ratio", "4", {}),
    ("produce.descent.step", "PT0S", {}),
    ("fetch", "fast", {}),
    ("request", "inf", {}),
    ("excluded.principal.name.list", "Group:admins", {}),
    ("sidecar.principal", "User:a;User:b", {}),
    ("sidecar.produce", "-1", {}),
    ("http.tls.cert.file", "/no/such/tls.crt", {}),
    ("http.tls.key.file", "/no/such/tls.key", {}),
    ("http.plain.port", "65536", {}),
    ("http.plain.changes", "sometimes", {}),
    ("spark.url", "sc//x", {}),
    ("pipeline.bootstrap.servers", "pipeline-kafka", {}),  # no port
    ("pipeline.observations.topic", "observations of the fleet", {}),
    ("pipeline.decisions.topic", "", {}),
    ("pipeline.heartbeats.topic", "heart/beats", {}),
    ("aggregator.checkpoint.location", "checkpoints/aggregator", {}),  # relative to what?
    ("aggregator.kafka.jars", "build/kafka.jar", {}),
    ("aggregator.driver.memory", "256m", {}),  # Spark refuses a driver under 450 MiB
    ("aggregator.driver.memory", "1.5g", {}),
    ("history.location", "history", {}),  # relative to what?
    ("history.jars", "hadoop-aws.jar", {}),  # relative to where the aggregator starts
    ("history.retention", "P0D", {}),
    ("history.interval", "5 minutes", {}),
    ("aggregator.metrics.port", "-1", {}),
    ("aggregator.metrics.port", "9404", {}),  # without history.location: nothing to export
    ("zookeeper.connect", "zk1:2181/kafka/", {}),
    ("zookeeper.session.timeout", "10", {}),
    ("state.store", "etcd", {}),
    ("state.store", "zookeeper", {}),  # without zookeeper.connect
    ("http.host", "not a host", {}),
    ("http.port", "70000", {}),
    ("api.token", "two words", {}),
    ("broker.id", "-3", {}),
    (cfg.CAPACITY_KEY, "0", {}),
    ("replication.max.tx.percent", "0", {}),
    ("replication.max.rx.percent", "101", {}),
    ("replication.min.rate.bytes.per.second", "0", {}),
    ("replication.change.threshold.percent", "-1", {}),
    ("replication.failure.threshold", "1.5", {}),
    ("replication.disk.guard.rate.bytes.per.second", "0", {}),
    ("replication.network.interface", "no-such-nic0", {}),  # refused at start: not an interface of this host
    ("replication.network.window", "PT0S", {}),
    ("replication.check.interval", "-PT1S", {}),
    ("replication.cleanup.foreign.after", "soon", {}),
    ("replication.stuck.after", "PT0S", {}),
    ("replication.keep.up.margin.percent", "-5", {}),
    ("replication.throttle.catch.up", "maybe", {}),
    ("remote.copy.max.bytes.per.second", "-1", {}),
    ("remote.fetch.max.bytes.per.second", "x", {}),
    ("remote.copy.lift.on.violation", "yes", {}),
    # beyond the table of KEYS: per-broker capacities and the admin client's properties
    (cfg.CAPACITY_KEY + ".2", "lots", {}),
    ("kafka.admin.bootstrap.servers", " , ", {}),
    ("kafka.admin.security.protocol", "TLS", {}),
    ("kafka.admin.request.timeout.ms", "0", {}),
    ("kafka.admin.retries", "5", {}),
    ("kafka.admin.sasl.jaas.config", PLAIN.format(PASSWORD).rstrip(";"), {}),
    ("kafka.admin.ssl.cafile", "/no/such/ca.pem", {"kafka.admin.security.protocol": "SASL_SSL"}),
    ("kafka.admin.ssl.truststore.location", "/no/such/ts.pem",
     {"kafka.admin.security.protocol": "SASL_SSL", "kafka.admin.ssl.truststore.type": "PEM"}),
]


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fault injection: were a bad value let through, `run` would get as far as building the sidecar (Spark,
    the cluster): this makes that fail the test at once instead. (conftest undoes the command's logging set-up.)"""
    def started(*args, **kwargs):
        raise AssertionError("the sidecar was built: a bad value got through")
    monkeypatch.setattr(wiring, "build_sidecar", started)


def run_with(tmp_path, keys: dict[str, str]):
    path = tmp_path / "sidecar.properties"
    path.write_text("".join(f"{P}{key}={value}\n" for key, value in keys.items()))
    return CliRunner().invoke(main, ["run", "--config", str(path)])


def test_the_table_has_a_bad_value_for_every_key():
    assert {key.name for key in KEYS} <= {key for key, _, _ in BAD_VALUES}


@pytest.mark.parametrize("key, value, more", BAD_VALUES, ids=[f"{key}={value}" for key, value, _ in BAD_VALUES])
def test_a_bad_value_stops_run_with_one_line_naming_the_key(tmp_path, nothing_starts, key, value, more):
    result = run_with(tmp_path, {**BASE, **more, key: value})

    assert result.exit_code == cli_grammar.BAD_CONFIGURATION, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"quota-sidecar: {P}{key}"), lines
    for secret in (PASSWORD, TOKEN, "two words"):
        assert secret not in result.output


def test_a_port_in_use_is_refused_at_start_naming_http_port(tmp_path, nothing_starts):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_with(tmp_path, {**BASE, "http.port": str(port)})

    assert result.exit_code == cli_grammar.BAD_CONFIGURATION
    assert result.stderr == (f"quota-sidecar: {P}http.port={port}: cannot listen on 127.0.0.1:{port} "
                             "(address already in use); expected a free port of an address of this host\n")


@pytest.mark.parametrize("host, why", [("no-such-host.invalid", "host not found"),
                                       ("192.0.2.254", "cannot assign requested address")])
def test_an_address_this_host_does_not_have_is_refused_at_start_naming_http_host(tmp_path, nothing_starts, host, why):
    result = run_with(tmp_path, {**BASE, "http.host": host})

    assert result.exit_code == cli_grammar.BAD_CONFIGURATION
    assert result.stderr.startswith(f"quota-sidecar: {P}http.host={host!r}: cannot listen on {host}:0 ({why})")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("url", ["", "sc://spark-connect:15002", "sc://localhost", "sc://h:15002/;user_id=me;token=x",
                                 "local", "local[1]", "local[*]", "local[4,2]", "spark://m1:7077",
                                 "spark://m1:7077,m2:7077", "yarn", "k8s://https://kubernetes:443"])
def test_spark_urls_accepted(url):
    config = cfg.from_properties({P + "kafka.admin.bootstrap.servers": "h:1", P + "storage.check.interval": "PT0S",
                                  P + "spark.url": url})
    assert config.spark_url == url


@pytest.mark.parametrize("url", ["sc//x", "sc://", "sc://h:port", "spark://m1", "spark://m1:7077,", "local[x]",
                                 "local[1", "http://spark:8080", "yarn-client", "k8s://", "embedded"])
def test_malformed_spark_urls_rejected_at_load(url):
    with pytest.raises(cfg.ConfigError) as raised:
        cfg.from_properties({P + "kafka.admin.bootstrap.servers": "h:1", P + "storage.check.interval": "PT0S",
                             P + "spark.url": url})
    assert str(raised.value).startswith(f"{P}spark.url={url!r}: expected empty (embedded), sc://host")
