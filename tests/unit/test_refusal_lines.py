"""A permission Kafka's authorizer refuses is one line naming the operation, the resource, the principal and what
stops (decide/refusal_lines.py, common/refusals.py), in the log's message, in status and as a metric."""

from datetime import datetime, timezone

import kafka.errors as Errors
import pytest

from quota_sidecar.common.errors import AuthorizationRefused, PermanentAdminError
from quota_sidecar.common.refusals import REFUSALS, Refusals
from quota_sidecar.configuration import config as configuration
from quota_sidecar.decide import acls
from quota_sidecar.decide.refusal_lines import RefusalLines, apis_of
from quota_sidecar.kafka_clients.kafka_client import CONSUMING, PRODUCING, admin_error, error_for_code
from quota_sidecar.serve import status as status_module
from quota_sidecar.serve.metrics import registry_for

EVERYTHING = ["kafka.admin.bootstrap.servers=kafka-1:9092", "storage.per.volume.limit.min.available.bytes=1000",
              "broker.id=1", "replication.capacity.bytes.per.second=100000000",
              "storage.local.log.dirs=/var/lib/kafka/data", "pipeline.bootstrap.servers=pipeline:9092",
              "sidecar.principal=User:quota-sidecar"]


@pytest.fixture
def explained():
    """REFUSALS explaining as a `run` with every feature on would, put back as it was afterwards."""
    before = REFUSALS.explain
    REFUSALS.explain = RefusalLines(configuration.load((), EVERYTHING), [acls.RUN]).explain
    yield REFUSALS
    REFUSALS.explain = before


def test_every_need_names_the_kafka_api_a_refusal_is_matched_by():
    config = configuration.load((), EVERYTHING, aggregator=True)
    for need in acls.needed(config, acls.PROCESSES):
        assert apis_of(need), need


def test_a_refused_cluster_request_names_the_permission_the_principal_and_every_feature_that_stops(explained):
    error = admin_error(Errors.ClusterAuthorizationFailedError(), "AlterClientQuotas for user <default>")
    assert isinstance(error, AuthorizationRefused) and isinstance(error, PermanentAdminError)  # never retried
    line = str(error)
    assert line.startswith("ALTER_CONFIGS on CLUSTER refused for User:quota-sidecar (AlterClientQuotas for user "
                           "<default> failed: [Error 31] ClusterAuthorizationFailedError): "), line
    assert "disk protection: no quota is written: disk protection cannot throttle producers" in line
    assert "cordoned log dirs: a dir at the limit is not cordoned" in line  # the same permission: it stops too
    assert "\n" not in line


def test_a_refused_topic_config_is_the_any_topic_permission_replication_throttles_need(explained):
    error = admin_error(Errors.TopicAuthorizationFailedError(), "IncrementalAlterConfigs of topic 'moving'")
    assert str(error).startswith("ALTER_CONFIGS on TOPIC * refused for User:quota-sidecar")
    assert "replication throttles: the lists are not written" in str(error)
    assert "disk protection" not in str(error)


def test_a_client_that_cannot_say_which_request_was_refused_names_each_permission_it_may_be(explained):
    refused = admin_error(Errors.TopicAuthorizationFailedError({"__quota_sidecar_state"}),
                          "writing quota:x to __quota_sidecar_state", PRODUCING)
    assert str(refused).startswith("DESCRIBE or WRITE on TOPIC __quota_sidecar_state refused")
    asked = admin_error(Errors.TopicAuthorizationFailedError({"__quota_sidecar_decisions"}), "asking the aggregator",
                        CONSUMING + PRODUCING)
    assert str(asked).startswith("DESCRIBE or READ on TOPIC __quota_sidecar_decisions refused")
    assert "the aggregator's decisions: no decision" in str(asked)


def test_a_request_the_table_does_not_list_says_so_rather_than_guess(explained):
    error = admin_error(Errors.GroupAuthorizationFailedError(), "JoinGroup of g")
    assert "refused for User:quota-sidecar (JoinGroup of g failed" in str(error)
    assert "a request `quota-sidecar acls` does not list" in str(error)


def test_refusals_are_counted_and_age_out_once_no_pass_is_refused_again():
    now = [1000.0]
    refusals = Refusals(clock=lambda: now[0])
    for _ in range(3):
        refusals.refused(AuthorizationRefused("DescribeLogDirs to broker 1 failed", ("DescribeLogDirs",), "CLUSTER"))
    (refusal,) = refusals.lately(30)
    assert (refusal.permission, refusal.times) == ("CLUSTER", 3)
    assert refusal.line == "refused: DescribeLogDirs to broker 1 failed"  # no explainer: the request as it failed
    now[0] += 31
    assert refusals.lately(30) == ()


def test_status_and_metrics_show_what_was_refused(explained, a_snapshot):
    error = admin_error(Errors.ClusterAuthorizationFailedError(), "DescribeLogDirs to broker 1")
    refusal = next(r for r in REFUSALS.lately(60) if r.line == str(error))
    snapshot = a_snapshot(refused=(refusal,))
    shown = status_module.build(snapshot, datetime.now(timezone.utc), "run")
    assert shown["refused"][0]["permission"] == "DESCRIBE on CLUSTER"
    assert f"refused by Kafka's authorizer ({refusal.times}x" in status_module.render(shown)
    registry = registry_for(lambda: snapshot)
    assert registry.get_sample_value("quota_sidecar_permission_refused", {"permission": "DESCRIBE on CLUSTER"}) == 1


def test_the_refused_topic_is_taken_from_the_producer_the_consumer_or_the_request(explained):
    produced = admin_error(Errors.TopicAuthorizationFailedError("__quota_sidecar_heartbeats"), "beating",
                           CONSUMING + PRODUCING)
    assert " on TOPIC __quota_sidecar_heartbeats refused" in str(produced)
    answered = error_for_code(Errors.TopicAuthorizationFailedError.errno, "Authorization failed.",
                              "CreateTopics of '__quota_sidecar_state'")
    assert str(answered).startswith("CREATE on TOPIC __quota_sidecar_state refused")


def test_a_permission_the_table_grants_through_another_names_that_one_and_all_it_serves(explained):
    error = admin_error(Errors.ClusterAuthorizationFailedError(), "DescribeClientQuotas")
    assert str(error).startswith("DESCRIBE_CONFIGS on CLUSTER refused for User:quota-sidecar (DescribeClientQuotas "
                                 "failed: [Error 31] ClusterAuthorizationFailedError), which `quota-sidecar acls` "
                                 "grants with ALTER_CONFIGS on CLUSTER: ")
    assert "disk protection: no quota is written" in str(error)  # ALTER_CONFIGS is not granted either


@pytest.mark.parametrize("refused, permission", [
    # Spark's source: its consumer names the topic; the admin client it reads offsets through (ListOffsets) does not
    ("Not authorized to access topics: [__quota_sidecar_observations]",
     "DESCRIBE or READ on TOPIC __quota_sidecar_observations"),
    ("Topic authorization failed.", "DESCRIBE or READ on TOPIC __quota_sidecar_observations"),
    ("Not authorized to access topics: [__quota_sidecar_decisions]",  # its sink
     "DESCRIBE or WRITE on TOPIC __quota_sidecar_decisions"),
])
def test_the_aggregators_query_stopped_by_a_refused_topic_is_one_line_naming_the_permission(refused, permission):
    from spark_jobs.aggregator import refused_topic

    refusals = Refusals()
    refusals.explain = RefusalLines(configuration.load((), EVERYTHING, aggregator=True), [acls.AGGREGATE]).explain
    spark_said = ("[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted.\n"
                  f"Caused by: org.apache.kafka.common.errors.TopicAuthorizationException: {refused}\n"
                  "\tat org.apache.kafka.clients...")
    topics = "__quota_sidecar_observations", "__quota_sidecar_decisions"

    line = refused_topic(Exception(spark_said), refusals, *topics)

    assert line.startswith(f"{permission} refused for User:quota-sidecar (Spark's Kafka "), line
    assert "the aggregator: every micro-batch fails" in line and "\n" not in line
    assert [r.permission for r in refusals.lately(60)] == [permission]
    assert refused_topic(Exception("[STREAM_FAILED] a broker went away"), refusals, *topics) is None
