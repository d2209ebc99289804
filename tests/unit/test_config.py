"""Configuration: every accepted form and every rejected case of the key table."""

from dataclasses import replace
from datetime import timedelta

import pytest

from harness.docs import site_pages
from quota_sidecar.common.errors import ConfigError
from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.configuration import config as cfg
from quota_sidecar.configuration import keys

P = cfg.PREFIX
BASE = {P + "kafka.admin.bootstrap.servers": "127.0.0.1:9092",
        P + "storage.per.volume.limit.min.available.bytes": "100"}


def load(**extra):
    return cfg.from_properties({**BASE, **{P + k: v for k, v in extra.items()}})


def test_defaults_follow_proposal_047():
    config = cfg.from_properties(BASE)
    assert config.check_interval == timedelta(minutes=1)
    assert config.validity == timedelta(minutes=5)
    assert config.fallback_factor == 1.0
    assert config.quotas == cfg.QuotaConfig()
    assert config.storage_limit == StorageLimit(min_available_bytes=100, descent_min_available_bytes=200,
                                                descent_horizon=timedelta(seconds=192))
    assert config.spark_url == "" and config.http_host == "127.0.0.1"
    assert not config.replication.enabled


def test_every_key_parsed_to_its_type():
    config = load(**{"produce": "1024", "fetch": "2048.5", "request": "55",
                     "excluded.principal.name.list": "User:bob; User:CN=my-cluster,O=io.strimzi;",
                     "storage.check.interval": "PT10S", "throttle.factor.fallback": "0",
                     "throttle.factor.validity.duration": "PT2M", "spark.url": "sc://spark:15002",
                     "http.port": "0", "kafka.admin.security.protocol": "PLAINTEXT",
                     "replication.capacity.bytes.per.second": "100000000",
                     "replication.capacity.bytes.per.second.3": "50000000",
                     "replication.max.tx.percent": "80", "replication.failure.threshold": "2",
                     "replication.cleanup.foreign.after": "PT1H", "remote.copy.lift.on.violation": "true"})
    assert config.quotas == cfg.QuotaConfig(1024.0, 2048.5, 55.0, ("CN=my-cluster,O=io.strimzi", "bob"))
    assert config.check_interval == timedelta(seconds=10)
    assert config.fallback_factor == 0.0 and config.validity == timedelta(minutes=2)
    assert config.spark_url == "sc://spark:15002" and config.http_port == 0
    assert config.admin_properties["security.protocol"] == "PLAINTEXT"
    assert config.replication.capacity(3) == 50_000_000 and config.replication.capacity(1) == 100_000_000
    assert config.replication.max_tx_percent == 80.0 and config.replication.failure_threshold == 2
    assert config.replication.cleanup_foreign_after == timedelta(hours=1)
    assert config.replication.remote_copy_lift_on_violation is True


def test_ratio_limit_alone_is_accepted():
    properties = {P + "kafka.admin.bootstrap.servers": "h:1", P + "storage.per.volume.limit.min.available.ratio": "0.05"}
    assert cfg.from_properties(properties).storage_limit == StorageLimit(
        min_available_ratio=0.05, descent_min_available_ratio=0.1, descent_horizon=timedelta(seconds=192))


@pytest.mark.parametrize("extra, start, horizon", [
    ({}, 200, timedelta(seconds=192)),  # twice the hard limit; 2 x (a minute's check + a 36 s step)
    ({"storage.per.volume.descent.min.available.bytes": "1000", "storage.per.volume.descent.horizon": "PT0S"},
     1000, None),
    ({"storage.check.interval": "PT2S", "produce.descent.step": "PT10S"}, 200, timedelta(seconds=24)),
])
def test_the_descent_starts_twice_the_hard_limit_away_unless_told(extra, start, horizon):
    limit = load(**extra).storage_limit
    assert (limit.descent_min_available_bytes, limit.descent_horizon) == (start, horizon)


def test_a_ratio_descent_starts_at_most_halfway_to_a_full_volume():
    properties = {P + "kafka.admin.bootstrap.servers": "h:1", P + "storage.per.volume.limit.min.available.ratio": "0.6"}
    assert cfg.from_properties(properties).storage_limit.descent_min_available_ratio == 0.8


def test_disabled_storage_check_needs_no_limit():
    properties = {P + "kafka.admin.bootstrap.servers": "h:1", P + "storage.check.interval": "PT0S"}
    config = cfg.from_properties(properties)
    assert config.storage_limit is None and not config.storage_check_enabled


def test_broker_id_comes_from_the_brokers_own_file():
    assert cfg.from_properties({**BASE, "node.id": "7"}).broker_id == 7
    assert cfg.from_properties({**BASE, "node.id": "7", P + "broker.id": "3"}).broker_id == 3


@pytest.mark.parametrize("key, value, mentions", [
    ("storage.per.volume.limit.min.available.ratio", "0.1", "set exactly one"),
    ("storage.per.volume.limit.min.available.bytes", "-1", "whole number >= 0"),
    ("storage.per.volume.limit.min.available.bytes", "ten", "whole number >= 0"),
    ("throttle.factor.fallback", "1.001", "0.0 to 1.0"),
    ("throttle.factor.fallback", "-0.1", "0.0 to 1.0"),
    ("throttle.factor.fallback", "nan", "0.0 to 1.0"),
    ("throttle.factor.validity.duration", "NOT 8601 FRIENDLY", "ISO-8601"),
    ("throttle.factor.validity.duration", "P1M", "no months"),
    ("throttle.factor.validity.duration", "-PT1M", "not negative"),
    ("storage.check.interval", "60", "ISO-8601"),
    ("excluded.principal.name.list", "User:foo;arnost", "User:<name>"),
    ("excluded.principal.name.list", "Group:admins", "User:<name>"),
    ("excluded.principal.name.list", "User:", "User:<name>"),
    ("produce", "0", "number > 0"),
    ("produce", "fast", "number > 0"),
    ("fetch", "-5", "number > 0"),
    ("request", "inf", "number > 0"),
    ("http.port", "70000", "0 to 65535"),
    ("replication.capacity.bytes.per.second", "0", "whole number > 0"),
    ("replication.capacity.bytes.per.second.2", "lots", "whole number > 0"),
    ("replication.max.tx.percent", "0", "above 0 and at most 100"),
    ("replication.max.rx.percent", "101", "above 0 and at most 100"),
    ("replication.change.threshold.percent", "-1", "from 0 to 100"),
    ("replication.failure.threshold", "1.5", "whole number >= 0"),
    ("storage.per.volume.limit.lead.time", "-PT30S", "not negative"),
    ("storage.per.volume.limit.lead.time", "30", "ISO-8601"),
    ("storage.fill.window", "PT0S", "longer than zero"),
    ("storage.fill.window", "one minute", "ISO-8601"),
    ("storage.per.volume.soft.limit.min.available.bytes", "-1", "whole number >= 0"),
    ("storage.per.volume.soft.limit.min.available.ratio", "1.5", "0.0 to 1.0"),
    ("replication.network.window", "PT0S", "longer than zero"),
    ("replication.check.interval", "PT0S", "longer than zero"),
    ("remote.copy.lift.on.violation", "yes", "true or false"),
    ("history.location", "relative/history", "an absolute path, or a URL"),
    ("history.retention", "P0D", "longer than zero"),
    ("history.retention", "90 days", "ISO-8601"),
    ("history.retention", "P3M", "no months"),
    ("aggregator.metrics.port", "70000", "from 0 to 65535"),
    ("aggregator.metrics.port", "9404", "needs client.quota.callback.static.history.location"),  # nothing to export
])
def test_invalid_value_is_one_line_naming_key_value_and_allowed(key, value, mentions):
    with pytest.raises(ConfigError) as raised:
        load(**{key: value})
    message = str(raised.value)
    assert "\n" not in message
    assert key in message and value in message and mentions in message


def test_the_history_is_off_by_default_and_kept_90_days():
    assert cfg.from_properties(BASE).history == cfg.HistoryConfig("", timedelta(days=90), timedelta(minutes=5))
    assert not cfg.from_properties(BASE).history.enabled
    config = load(**{"history.location": "s3a://bucket/quota-sidecar/history", "history.retention": "P30D"})
    assert config.history == cfg.HistoryConfig("s3a://bucket/quota-sidecar/history", timedelta(days=30))
    assert config.history.enabled
    assert load(**{"history.jars": "/opt/a.jar,/opt/b.jar"}).history.jars == ("/opt/a.jar", "/opt/b.jar")


def test_the_report_reads_the_limit_and_the_history_without_a_cluster(tmp_path):
    properties = tmp_path / "report.properties"
    properties.write_text(f"{P}storage.per.volume.limit.min.available.ratio=0.1\n{P}history.location=/data/h\n"
                          f"{P}kafka.admin.security.protocol=SSL\n")

    config = cfg.load_capacity([str(properties)], ["history.retention=P7D", "spark.url=local[2]"])

    assert config == cfg.CapacityConfig(StorageLimit(min_available_ratio=0.1),
                                        cfg.HistoryConfig("/data/h", timedelta(days=7)), "local[2]")
    assert cfg.load_capacity([]) == cfg.CapacityConfig(None)
    with pytest.raises(ConfigError, match="history.retentoin is not a known key; did you mean"):
        cfg.load_capacity([], ["history.retentoin=P7D"])


def test_forecast_defaults_and_values():
    assert cfg.from_properties(BASE).fill_window == timedelta(minutes=1)
    assert cfg.from_properties(BASE).storage_limit.lead_time == timedelta(0)
    config = load(**{"storage.per.volume.limit.lead.time": "PT30S", "storage.fill.window": "PT5M"})
    assert config.storage_limit.lead_time == timedelta(seconds=30) and config.fill_window == timedelta(minutes=5)
    assert config.storage_limit.as_params()["lead_time_seconds"] == 30.0


@pytest.mark.parametrize("kind, hard, soft, limit", [
    ("bytes", "100", "300", StorageLimit(min_available_bytes=100, soft_min_available_bytes=300)),
    ("ratio", "0.05", "0.1", StorageLimit(min_available_ratio=0.05, soft_min_available_ratio=0.1)),
    ("ratio", "0.05", "1", StorageLimit(min_available_ratio=0.05, soft_min_available_ratio=1.0)),
])
def test_soft_limit_of_the_hard_limits_kind_above_it(kind, hard, soft, limit):
    config = cfg.from_properties({P + "kafka.admin.bootstrap.servers": "h:1", P + "produce": "1000",
                                  P + "storage.per.volume.limit.min.available." + kind: hard,
                                  P + "storage.per.volume.soft.limit.min.available." + kind: soft})
    assert replace(config.storage_limit, descent_min_available_bytes=None, descent_min_available_ratio=None,
                   descent_horizon=None) == limit


SOFT = P + "storage.per.volume.soft.limit.min.available."


@pytest.mark.parametrize("keys, mentions", [
    ({"soft.limit.min.available.bytes": "100", "produce": "1"},
     SOFT + "bytes=100: must be above the hard limit " + P + "storage.per.volume.limit.min.available.bytes=100"),
    ({"soft.limit.min.available.bytes": "99", "produce": "1"}, SOFT + "bytes=99: must be above the hard limit"),
    ({"limit.min.available.bytes": None, "limit.min.available.ratio": "0.1",
      "soft.limit.min.available.ratio": "0.1", "produce": "1"}, SOFT + "ratio=0.1: must be above the hard limit"),
    ({"soft.limit.min.available.ratio": "0.2", "produce": "1"},
     SOFT + "ratio=0.2: a soft limit needs a hard limit of its kind"),
    ({"soft.limit.min.available.bytes": "300", "soft.limit.min.available.ratio": "0.2", "produce": "1"},
     "set at most one soft limit"),
    ({"soft.limit.min.available.bytes": "300"}, SOFT + "bytes=300 needs " + P + "produce"),
    ({"limit.min.available.bytes": None, "storage.check.interval": "PT0S", "soft.limit.min.available.bytes": "300",
      "produce": "1"}, SOFT + "bytes=300: a soft limit needs a hard limit of its kind"),
])
def test_bad_soft_limit_is_one_line_naming_the_key(keys, mentions):
    properties = {**BASE, P + "kafka.admin.bootstrap.servers": "h:1"}
    for key, value in keys.items():
        full = P + (key if key.startswith(("produce", "storage.")) else "storage.per.volume." + key)
        if value is None:
            properties.pop(full)
        else:
            properties[full] = value
    with pytest.raises(ConfigError) as raised:
        cfg.from_properties(properties)
    assert "\n" not in str(raised.value) and mentions in str(raised.value)


def test_missing_bootstrap_is_rejected():
    with pytest.raises(ConfigError, match="bootstrap.servers is required"):
        cfg.from_properties({P + "storage.per.volume.limit.min.available.bytes": "100"})


def test_missing_limit_is_rejected_while_checking_storage():
    with pytest.raises(ConfigError, match="min.available.bytes or .*min.available.ratio is required"):
        cfg.from_properties({P + "kafka.admin.bootstrap.servers": "h:1"})


@pytest.mark.parametrize("typo, suggestion", [
    ("storage.per.volume.limit.min.availble.bytes", "storage.per.volume.limit.min.available.bytes"),
    ("throttle.factor.fallbak", "throttle.factor.fallback"),
    ("produse", "produce"),
    ("replication.max.tx.percnt", "replication.max.tx.percent"),
])
def test_misspelt_key_suggests_the_nearest(typo, suggestion):
    with pytest.raises(ConfigError) as raised:
        load(**{typo: "1"})
    assert f"did you mean {P}{suggestion}?" in str(raised.value)


def test_keys_outside_the_prefix_are_ignored():
    config = cfg.from_properties({**BASE, "log.dirs": "/data", "listeners": "PLAINTEXT://:9092"})
    assert config.storage_limit.min_available_bytes == 100


def test_secrets_never_reach_errors_or_redacted_output():
    secret = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="hunter2";'
    config = load(**{"kafka.admin.security.protocol": "SASL_PLAINTEXT", "kafka.admin.sasl.mechanism": "PLAIN",
                     "kafka.admin.sasl.jaas.config": secret, "api.token": "s3cret-token"})
    assert "hunter2" not in repr(config.redacted()) and "s3cret-token" not in repr(config)
    with pytest.raises(ConfigError) as raised:
        load(**{"api.token": "x", "http.port": "-1"})
    assert "s3cret" not in str(raised.value)


def test_the_sidecars_own_principal_is_its_sasl_user_or_the_one_named():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="qs" password="x";'
    sasl = {"kafka.admin.security.protocol": "SASL_PLAINTEXT", "kafka.admin.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.admin.sasl.jaas.config": jaas}
    assert load(**sasl).quotas.sidecar_entity == ("qs", "quota-sidecar")
    named = load(**{"sidecar.principal": "User:CN=quota-sidecar,O=ops"}).quotas  # mutual TLS: the mapped name
    assert named.sidecar_entity == ("CN=quota-sidecar,O=ops", "quota-sidecar")
    alone = load().quotas
    assert (alone.sidecar_entity, alone.sidecar_produce) == ((None, "quota-sidecar"), 1_000_000)


def test_properties_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# broker config\nnode.id=2\n"
                    f"{P}kafka.admin.bootstrap.servers=127.0.0.1:9092\n"
                    f"{P}storage.per.volume.limit.min.available.bytes = 100\n"
                    f"{P}produce: 1000\n")
    config = cfg.load(str(path), ["produce=2000", f"{P}throttle.factor.fallback=0.5"])
    assert config.broker_id == 2
    assert config.quotas.produce == 2000.0 and config.fallback_factor == 0.5


def test_later_files_win_and_overrides_win_over_files(tmp_path):
    broker, sidecar, secrets = (tmp_path / name for name in ("server.properties", "sidecar.properties", "secret"))
    broker.write_text("node.id=4\nlog.dirs=/data/kafka\n")
    sidecar.write_text(f"{P}kafka.admin.bootstrap.servers=127.0.0.1:9092\n"
                       f"{P}storage.per.volume.limit.min.available.bytes=100\n{P}produce=1000\n")
    secrets.write_text(f"{P}api.token=s3cret\n{P}produce=3000\n")

    config = cfg.load([str(broker), str(sidecar), str(secrets)], ["fetch=500"])

    assert config.broker_id == 4 and config.local_watch.log_dirs == ("/data/kafka",)
    assert config.api_token == "s3cret" and config.quotas.produce == 3000.0 and config.quotas.fetch == 500.0


def test_override_without_equals_is_rejected():
    with pytest.raises(ConfigError, match="expected key=value"):
        cfg.parse_overrides(["produce"])


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        cfg.load(str(tmp_path / "missing.properties"))


def test_the_configuration_page_has_every_key_under_its_feature():
    page = site_pages().configuration_page()
    missing = [key.name for key in keys.KEYS if f"| `{key.name}` | {key.allowed} |" not in page.replace("\\|", "|")]
    assert not missing, f"keys missing from docs/configuration.md: {missing}"
    assert page.count("\n## ") == len(site_pages().FEATURES)


@pytest.mark.parametrize("raw, seconds", [("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("PT30S", 30),
                                          ("P1D", 86400), ("0.5s", 0.5)])
def test_a_duration_key_takes_the_short_form_and_iso_8601_alike(raw, seconds):
    assert load(**{"throttle.factor.validity.duration": raw}).validity.total_seconds() == seconds
