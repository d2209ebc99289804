"""The HTTP endpoint without a cluster: status, health and metrics read the snapshot; override changes
are refused before the store is touched unless the token is right, they come over https or from this host,
and the body is one; an accepted one is logged and recorded with where it came from."""

import logging
from datetime import timedelta

import builders
import pytest

from quota_sidecar.act.snapshot import LocalWatchView
from quota_sidecar.decide.throttle_factor import FactorState
from quota_sidecar.serve.http_api import BadTokenBackoff, Refusals, create_app, readiness
from quota_sidecar.serve.metrics import registry_for


class UntouchableStore:
    """Fault injection: a store that fails any test that reaches it."""

    def __getattr__(self, name):
        raise AssertionError(f"the override store was reached ({name})")


@pytest.fixture
def client(a_snapshot):
    def make(token: str = "", replication: bool = False, store=None, origin: str = "127.0.0.1", https: bool = False,
             plain_changes: bool = False, refusals: Refusals | None = None):
        snapshot = a_snapshot(replication=replication)
        registry = registry_for(lambda: snapshot)
        app = create_app(lambda: snapshot, store or UntouchableStore(), token, registry, plain_changes, refusals)
        http = app.test_client()
        http.environ_base["REMOTE_ADDR"] = origin
        if https:
            plain_open = http.open
            http.open = lambda *args, **kwargs: plain_open(*args, base_url="https://localhost", **kwargs)
        http.registry = registry
        return http
    return make


BEARER = {"Authorization": "Bearer t"}


def test_status_and_health_come_from_the_snapshot(client):
    http = client()

    body = http.get("/status").get_json()
    assert body["sidecar"]["mode"] == "running" and body["throttle"]["factor"] == 0.0
    assert http.get("/healthz").get_json() == {"ok": True, "last_poll": "2026-11-23T08:00:00+00:00"}
    assert b"quota_sidecar_throttle_factor 0.0" in http.get("/metrics").data


@pytest.mark.parametrize("token, header, code", [
    ("", None, 403),                     # no token configured: read-only
    ("s3cret", None, 401),
    ("s3cret", "Bearer wrong", 401),
    ("s3cret", "s3cret", 401),           # the scheme is part of it
])
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_changes_without_the_right_token_are_refused(client, token, header, code, method):
    response = client(token).open("/throttle/2", method=method, json={"rate": 5},
                                  headers={"Authorization": header} if header else {})

    assert response.status_code == code
    assert "s3cret" not in response.get_data(as_text=True)


@pytest.mark.parametrize("body, says", [
    ({"rate": 0}, "rate=0"),
    ({"rate": "5"}, "rate='5'"),
    ({"rate": True}, "rate=True"),
    ({"rate": 5, "autoremove": "yes"}, "autoremove"),
    ([5], "JSON object"),
])
def test_a_bad_override_is_refused_with_what_is_wrong(client, body, says):
    response = client("t").put("/throttle", json=body, headers={"Authorization": "Bearer t"})

    assert response.status_code == 400 and says in response.get_json()["error"]


@pytest.mark.parametrize("path, data, code, says", [
    ("/throttle/2", b'{"rate": 5', 400, "JSON object"),                       # malformed
    ("/throttle/2", b'{"rate": 5, "burst": 9}', 400, "unknown fields ['burst']"),
    ("/throttle/2", b'{"rate": 5.5}', 400, "whole number"),
    ("/throttle/2", b'{"rate": 1' + b'0' * 5000 + b'}', 413, "larger than 4096 bytes"),   # a body far above an override's
    ("/throttle/9", b'{"rate": 5}', 404, "broker 9 is not in the cluster (brokers 1, 2, 3)"),
    ("/throttle/x", b'{"rate": 5}', 404, "not found"),
])
def test_bad_input_is_a_4xx_saying_what_is_wrong_and_changes_nothing(client, path, data, code, says):
    store = builders.MemoryStore()
    response = client("t", store=store).put(path, data=data, headers={**BEARER, "Content-Type": "application/json"})

    assert response.status_code == code and says.lower() in response.get_json()["error"].lower()
    assert store.values == {}


def test_changes_over_plain_http_from_another_host_are_refused_unless_allowed(client):
    refused = client("t", origin="10.0.0.5").put("/throttle/2", json={"rate": 5}, headers=BEARER)
    assert refused.status_code == 403 and "https" in refused.get_json()["error"]

    for allowed in (client("t", store=builders.MemoryStore(), origin="10.0.0.5", https=True),
                    client("t", store=builders.MemoryStore(), origin="10.0.0.5", plain_changes=True),
                    client("t", store=builders.MemoryStore(), origin="::1")):
        assert allowed.put("/throttle/2", json={"rate": 5}, headers=BEARER).status_code == 200


def test_an_accepted_change_is_logged_and_recorded_with_where_it_came_from(client, caplog):
    caplog.set_level(logging.INFO, logger="quota_sidecar.serve.http_api")
    store = builders.MemoryStore()
    http = client("t", store=store, origin="10.0.0.5", https=True)

    assert http.put("/throttle/2", json={"rate": 5}, headers=BEARER).get_json() == {"broker_id": 2,
                                                                                   "override": {"rate": 5}}
    read = http.get("/throttle/2").get_json()
    assert read["override"] == {"rate": 5} and read["changed"]["by"] == "10.0.0.5" and read["changed"]["over"] == "https"
    assert http.delete("/throttle/2", headers=BEARER).get_json() == {"broker_id": 2, "removed": True}
    said = [record.getMessage() for record in caplog.records]
    assert "throttle override set by 10.0.0.5 over https: broker 2 -> {'rate': 5}" in said
    assert any(line.startswith("throttle override removed by 10.0.0.5 over https: broker 2") for line in said)


def test_wrong_tokens_back_off_doubling_and_are_counted():
    now = [100.0]
    backoff = BadTokenBackoff(clock=lambda: now[0], longest=60.0)
    assert [backoff.failed("a") for _ in range(3)] == [1, 2, 3]
    assert backoff.retry_after("a") == 4.0 and backoff.retry_after("b") == 0.0  # per address
    for _ in range(10):
        backoff.failed("a")
    assert backoff.retry_after("a") == 60.0  # at most a minute
    backoff.succeeded("a")
    assert backoff.retry_after("a") == 0.0


def test_while_backing_off_even_the_right_token_waits_and_the_refusals_are_metrics(client):
    refusals = Refusals()
    http = client("t", store=builders.MemoryStore(), refusals=refusals, origin="10.0.0.5", https=True)
    assert http.put("/throttle/2", json={"rate": 5}, headers={"Authorization": "Bearer guess"}).status_code == 401
    waiting = http.put("/throttle/2", json={"rate": 5}, headers=BEARER)

    assert waiting.status_code == 429 and waiting.headers["Retry-After"] == "1"
    scraped = http.get("/metrics").get_data(as_text=True)
    assert 'quota_sidecar_http_changes_refused_total{reason="token"} 1.0' in scraped
    assert 'quota_sidecar_http_changes_refused_total{reason="backoff"} 1.0' in scraped
    local = client("t", store=builders.MemoryStore(), refusals=refusals)  # this host's clients are inside the pod
    assert local.put("/throttle/2", json={"rate": 5}, headers={"Authorization": "Bearer guess"}).status_code == 401
    assert local.put("/throttle/2", json={"rate": 5}, headers=BEARER).status_code == 200


def test_autoremove_is_only_for_the_global_override(client):
    response = client("t").put("/throttle/2", json={"rate": 5, "autoremove": True}, headers={"Authorization": "Bearer t"})

    assert response.status_code == 400


WATCHING = LocalWatchView(("/data/b",), {}, (), running=True)


@pytest.mark.parametrize("seconds_since, max_age, code, stale", [
    (30, None, 200, False),          # within the factor's validity (the default)
    (30, "10", 503, True),           # older than asked
    (30, "30", 200, False),
    (10_000, None, 503, True),       # the fallback has taken over
])
def test_strict_readiness_follows_the_age_of_the_last_successful_pass(a_snapshot, seconds_since, max_age, code, stale):
    body, status = readiness(a_snapshot(local_watch=WATCHING), builders.AT + timedelta(seconds=seconds_since), max_age,
                             "1")

    assert status == code and body["ready"] == (code == 200) and body["strict"] is True
    assert body["last_success_age_seconds"] == seconds_since and body["decisions_stale"] is stale


def test_strict_readiness_waits_for_the_first_successful_pass(a_snapshot):
    body, status = readiness(a_snapshot(factor=FactorState()), builders.AT, None, "true")

    assert status == 503 and body["last_success_age_seconds"] is None and body["decisions_stale"] is False


@pytest.mark.parametrize("factor, seconds_since", [
    (FactorState(), 0),                               # before the first pass: a fresh install, the aggregator not up
    (FactorState(1.0, "initial", valid_from=builders.AT), 10_000),  # every pass failed since the first
    (None, 10_000),                                   # the last success long ago: the fallback rules
])
@pytest.mark.parametrize("watch", [WATCHING, None], ids=["watching", "no-watch"])
def test_ready_while_serving_and_watching_whatever_the_passes(a_snapshot, factor, seconds_since, watch):
    """A broker pod is Ready only when its sidecar is: stale decisions must not take the broker out of service."""
    snapshot = a_snapshot(local_watch=watch, **({"factor": factor} if factor else {}))
    body, status = readiness(snapshot, builders.AT + timedelta(seconds=seconds_since), None, None)

    assert status == 200 and body["ready"] is True and body["strict"] is False
    assert body["decisions_stale"] is (seconds_since > 300)
    assert body["local_watch"] == ("running" if watch else "off")


@pytest.mark.parametrize("strict", [None, "1"])
def test_not_ready_once_the_local_watch_has_stopped(a_snapshot, strict):
    stopped = LocalWatchView(("/data/b",), {}, (), running=False)

    body, status = readiness(a_snapshot(local_watch=stopped), builders.AT, None, strict)

    assert status == 503 and body["ready"] is False and body["local_watch"] == "stopped"


def test_the_readiness_endpoint_is_not_strict_unless_asked(client):
    http = client()
    plain = http.get("/readyz")  # the snapshot's last success is days before now: stale

    assert plain.status_code == 200 and plain.get_json()["decisions_stale"] is True
    assert http.get("/readyz?strict=1").status_code == 503
    assert http.get("/readyz?strict=0").status_code == 200


@pytest.mark.parametrize("query, error", [
    ("strict=maybe", "strict='maybe': expected 1 or 0"),
    ("strict=1&max_age=-5", "max_age='-5': expected seconds, a number >= 0"),
    ("max_age=inf", "max_age='inf': expected seconds"),
])
def test_the_readiness_endpoint_refuses_a_bad_query_in_one_line(client, query, error):
    response = client().get(f"/readyz?{query}")

    assert response.status_code == 400 and error in response.get_json()["error"]


def test_readiness_endpoint_refuses_a_max_age_that_is_not_a_number(client):
    response = client().get("/readyz?max_age=soon")

    assert response.status_code == 400 and "max_age='soon'" in response.get_json()["error"]
