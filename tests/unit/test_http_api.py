"""The HTTP endpoint without a cluster: status, health and metrics read the snapshot; override changes
are refused before the store is touched unless the token is right."""

from datetime import timedelta

import builders
import pytest

from quota_sidecar.decide.throttle_factor import FactorState
from quota_sidecar.serve.http_api import create_app, readiness
from quota_sidecar.serve.metrics import registry_for


class UntouchableStore:
    """Fault injection: a store that fails any test that reaches it."""

    def __getattr__(self, name):
        raise AssertionError(f"the override store was reached ({name})")


@pytest.fixture
def client(a_snapshot):
    def make(token: str = "", replication: bool = False):
        snapshot = a_snapshot(replication=replication)
        app = create_app(lambda: snapshot, UntouchableStore(), token, registry_for(lambda: snapshot))
        return app.test_client()
    return make


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


def test_autoremove_is_only_for_the_global_override(client):
    response = client("t").put("/throttle/2", json={"rate": 5, "autoremove": True}, headers={"Authorization": "Bearer t"})

    assert response.status_code == 400


@pytest.mark.parametrize("seconds_since, max_age, code", [
    (30, None, 200),          # within the factor's validity (the default)
    (30, "10", 503),          # older than asked
    (30, "30", 200),
    (10_000, None, 503),      # the fallback has taken over
])
def test_readiness_follows_the_age_of_the_last_successful_pass(a_snapshot, seconds_since, max_age, code):
    body, status = readiness(a_snapshot(), builders.AT + timedelta(seconds=seconds_since), max_age)

    assert status == code and body["ready"] == (code == 200)
    assert body["last_success_age_seconds"] == seconds_since


def test_not_ready_before_the_first_successful_pass(a_snapshot):
    body, status = readiness(a_snapshot(factor=FactorState()), builders.AT, None)

    assert status == 503 and body["last_success_age_seconds"] is None


def test_readiness_endpoint_refuses_a_max_age_that_is_not_a_number(client):
    response = client().get("/readyz?max_age=soon")

    assert response.status_code == 400 and "max_age='soon'" in response.get_json()["error"]
