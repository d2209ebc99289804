"""Client quotas wanted for a factor, and the minimal writes that get the cluster there."""

import pytest

from quota_sidecar import ownership, quotas
from quota_sidecar.config import QuotaConfig
from quota_sidecar.ownership import Write
from quota_sidecar.quotas import FETCH, PRODUCE, REQUEST, UNLIMITED
from quota_sidecar.records import Owned


@pytest.mark.parametrize("produce, factor, expected", [
    (1024, 1.0, 1024), (1024, 0.0, 1), (1024, 0.5, 512), (1000, 0.0015, 1), (1001, 0.5, 500),
    (None, 1.0, None), (None, 0.3, None), (None, 0.0, 1),
])
def test_producer_rate_is_scaled_and_floored_at_one_byte(produce, factor, expected):
    assert quotas.wanted(QuotaConfig(produce=produce), factor).default_user[PRODUCE] == expected


def test_fetch_and_request_are_never_scaled():
    wanted = quotas.wanted(QuotaConfig(produce=100, fetch=2000, request=40), 0.0)
    assert wanted.default_user == {PRODUCE: 1, FETCH: 2000, REQUEST: 40}


def test_json_shape_uses_null_for_unlimited_and_sorted_names():
    wanted = quotas.wanted(QuotaConfig(fetch=10, excluded_principals=("alice", "bob")), 1.0)
    assert wanted.to_json() == {"default_user": {PRODUCE: None, FETCH: 10, REQUEST: None},
                                "excluded_users": ["alice", "bob"]}


def test_excluded_users_get_unlimited_quotas_for_every_managed_key():
    entities = quotas.wanted(QuotaConfig(produce=100, fetch=50, excluded_principals=("alice",)), 0.0).entities()
    assert entities["alice"] == {PRODUCE: UNLIMITED, FETCH: UNLIMITED}


def test_the_sidecars_own_clients_are_exempt_before_the_default_user_is_throttled():
    entities = list(quotas.wanted(QuotaConfig(produce=100, sidecar_client_id="qs"), 0.0).entities().items())
    assert entities[0] == ((None, "qs"), {PRODUCE: UNLIMITED}) and entities[1][0] is None


def plan(wanted, in_force, records):
    return ownership.plan(quotas.targets(wanted), quotas.flatten(in_force), records)


def test_nothing_is_written_when_the_cluster_already_agrees():
    wanted = quotas.wanted(QuotaConfig(produce=100, excluded_principals=("alice",)), 1.0)
    in_force = {None: {PRODUCE: 100.0}, "alice": {PRODUCE: UNLIMITED}, (None, "quota-sidecar"): {PRODUCE: UNLIMITED}}
    records = {(None, PRODUCE): Owned(None, 100.0), ("alice", PRODUCE): Owned(None, UNLIMITED),
               ((None, "quota-sidecar"), PRODUCE): Owned(None, UNLIMITED)}
    assert plan(wanted, in_force, records) == []


def test_a_change_records_the_value_it_replaced_first():
    first = plan(quotas.wanted(QuotaConfig(produce=100), 0.0), {None: {PRODUCE: 5000.0}}, {})
    assert first == [Write(((None, "quota-sidecar"), PRODUCE), None, UNLIMITED, None),
                     Write((None, PRODUCE), 5000.0, 1.0, 5000.0)]
    again = plan(quotas.wanted(QuotaConfig(produce=100), 1.0), {None: {PRODUCE: 1.0}},
                 {(None, PRODUCE): Owned(5000.0, 1.0)})
    assert again[1:] == [Write((None, PRODUCE), 1.0, 100.0, 5000.0)]


def test_a_quota_the_sidecar_did_not_set_is_never_removed():
    wanted = quotas.wanted(QuotaConfig(), 1.0)  # wants no producer quota
    assert [w.target for w in plan(wanted, {None: {PRODUCE: 777.0, FETCH: 5.0}}, {})] == [
        ((None, "quota-sidecar"), PRODUCE)]


def test_a_quota_the_sidecar_set_goes_back_to_what_it_replaced():
    wanted = quotas.wanted(QuotaConfig(), 1.0)
    writes = plan(wanted, {None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 1.0)})
    assert writes[1:] == [Write((None, PRODUCE), 1.0, None, None, forget=True)] and writes[1].changes


def test_restore_returns_every_recorded_target():
    in_force = quotas.flatten({None: {PRODUCE: 1.0}, "alice": {PRODUCE: UNLIMITED}})
    records = {(None, PRODUCE): Owned(300.0, 1.0), ("alice", PRODUCE): Owned(None, UNLIMITED)}
    assert ownership.restore(in_force, records) == [
        Write((None, PRODUCE), 1.0, 300.0, 300.0, forget=True),
        Write(("alice", PRODUCE), UNLIMITED, None, None, forget=True)]


def test_a_restored_target_already_back_is_only_forgotten():
    [write] = ownership.restore({}, {(None, FETCH): Owned(None, None)})
    assert write.forget and not write.changes
