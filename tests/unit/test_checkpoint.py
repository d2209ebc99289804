"""The aggregator's checkpoint belongs to one pipeline (spark_jobs/checkpoint.py): its default location derived from
the pipeline, and the marker that makes an aggregator of another pipeline refuse it at start."""
import json
import logging
import os

import pytest

from quota_sidecar.configuration.properties import PREFIX
from spark_jobs import checkpoint
from spark_jobs.aggregator import CannotAggregate, claimed_checkpoint
from spark_jobs.checkpoint import MARKER, CheckpointError, Owner

OURS = Owner("cluster-B", "obs", "dec")
NAMED = "aggregator.checkpoint.location=/x"


def test_the_default_location_is_the_same_for_a_pipeline_and_another_for_any_other():
    here = checkpoint.default_location("/tmp", OURS)

    assert here == checkpoint.default_location("/tmp", Owner("cluster-B", "obs", "dec"))
    assert os.path.dirname(here) == "/tmp"
    assert os.path.basename(here).startswith("quota-sidecar-aggregator-")
    others = [Owner("cluster-A", "obs", "dec"), Owner("cluster-B", "obs2", "dec"), Owner("cluster-B", "obs", "dec2"),
              Owner("cluster-B", "dec", "obs")]
    assert len({here, *(checkpoint.default_location("/tmp", other) for other in others)}) == 1 + len(others)


VERDICTS = {
    "its own marker": (OURS, True, "ours"),
    "an empty folder or none": (None, False, "new"),
    "Spark's files without a marker: written before markers": (None, True, "adopted"),
}


@pytest.mark.parametrize("recorded, spark_wrote, expected", VERDICTS.values(), ids=VERDICTS.keys())
def test_verdict(recorded, spark_wrote, expected):
    assert checkpoint.verdict(OURS, recorded, spark_wrote, NAMED) == expected


@pytest.mark.parametrize("other", [Owner("cluster-A", "obs", "dec"), Owner("cluster-B", "o2", "dec"),
                                   Owner("cluster-B", "obs", "d2")])
def test_another_pipelines_marker_is_refused_in_one_line_naming_both(other):
    with pytest.raises(CheckpointError) as refused:
        checkpoint.verdict(OURS, other, True, NAMED)

    assert str(refused.value) == (f"{NAMED} was written for cluster {other.cluster_id} (topics "
                                  f"{other.observations_topic} -> {other.decisions_topic}), not this pipeline's "
                                  "cluster cluster-B (topics obs -> dec): give another location or delete it")


def test_a_first_start_marks_its_checkpoint_and_a_later_one_finds_it_its_own(tmp_path):
    location = tmp_path / "checkpoint"

    assert checkpoint.claim(str(location), OURS, NAMED) is None
    assert Owner.from_json((location / MARKER).read_text()) == OURS
    (location / "offsets").mkdir()  # the query has run
    assert checkpoint.claim(str(location), OURS, NAMED) is None
    assert set(os.listdir(location)) == {MARKER, "offsets"}


def test_another_pipelines_checkpoint_is_refused_and_left_as_it_was(tmp_path):
    checkpoint.claim(str(tmp_path), Owner("cluster-A", "obs", "dec"), NAMED)
    before = (tmp_path / MARKER).read_text()

    with pytest.raises(CheckpointError, match="was written for cluster cluster-A .* not this pipeline's cluster "
                                              "cluster-B"):
        checkpoint.claim(str(tmp_path), OURS, NAMED)
    assert (tmp_path / MARKER).read_text() == before


def test_a_checkpoint_of_sparks_files_without_a_marker_is_adopted_and_said(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "metadata").write_text('{"id":"x"}')

    said = checkpoint.claim(str(tmp_path), OURS, NAMED)

    assert said == (f"{NAMED} has no marker of its pipeline (written before markers): taken as this pipeline's, "
                    "cluster cluster-B (topics obs -> dec)")
    assert Owner.from_json((tmp_path / MARKER).read_text()) == OURS


@pytest.mark.parametrize("text", ["not json", "[]", json.dumps({"cluster_id": "c", "observations_topic": "o"}),
                                  json.dumps({"cluster_id": 1, "observations_topic": "o", "decisions_topic": "d"})])
def test_a_marker_that_is_not_one_is_one_line(tmp_path, text):
    (tmp_path / MARKER).write_text(text)

    with pytest.raises(CheckpointError, match=f"^{NAMED}: .*{MARKER} is not the marker of a pipeline") as refused:
        checkpoint.claim(str(tmp_path), OURS, NAMED)
    assert "\n" not in str(refused.value)


def test_a_location_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")

    with pytest.raises(CheckpointError, match=f"^{NAMED}: cannot read .*a-file/{MARKER}: Not a directory$"):
        checkpoint.claim(str(tmp_path / "a-file"), OURS, NAMED)


@pytest.mark.parametrize("location, local", [("/var/lib/x", "/var/lib/x"), ("file:///var/lib/x", "/var/lib/x"),
                                             ("s3a://bucket/x", None), ("hdfs://nn:8020/x", None)])
def test_local_path(location, local):
    assert checkpoint.local_path(location) == local


def test_the_aggregator_derives_the_default_and_refuses_another_pipelines_in_one_line(tmp_path):
    mine = claimed_checkpoint("", OURS, "", str(tmp_path))
    assert mine == checkpoint.default_location(str(tmp_path), OURS)

    with pytest.raises(CannotAggregate) as refused:
        claimed_checkpoint(mine, Owner("cluster-A", "obs", "dec"), "", str(tmp_path))

    assert not refused.value.unreachable  # a configuration to fix: exit code 2
    [line] = refused.value.line.splitlines()
    assert line.startswith(f"{PREFIX}aggregator.checkpoint.location={mine} was "
                           "written for cluster cluster-B (topics obs -> dec), not this pipeline's cluster cluster-A")


@pytest.mark.parametrize("location, spark_url", [("s3a://bucket/checkpoint", ""), ("/var/lib/x", "sc://spark:15002")])
def test_a_checkpoint_off_this_hosts_filesystem_is_not_checked_and_said(tmp_path, caplog, location, spark_url):
    caplog.set_level(logging.INFO)

    assert claimed_checkpoint(location, OURS, spark_url, str(tmp_path)) == location

    [line] = [record.getMessage() for record in caplog.records]
    assert location in line and "is not checked" in line
