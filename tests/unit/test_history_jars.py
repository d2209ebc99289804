"""Which jars of the history's filesystem the aggregator and the report hand Spark: history.jars when set, else for
s3a:// those `make s3a` resolved, and none for a local path."""

from spark_jobs import history
from spark_jobs.history import filesystem_jars


def test_an_s3a_history_gets_the_jars_make_s3a_resolved(tmp_path, monkeypatch):
    listed = tmp_path / "s3a.classpath"
    listed.write_text("/m2/hadoop-aws.jar:/m2/bundle.jar\n")
    monkeypatch.setattr(history, "S3A_CLASSPATH", str(listed))

    assert filesystem_jars("s3a://history/fleet") == ["/m2/hadoop-aws.jar", "/m2/bundle.jar"]
    assert filesystem_jars("/data/history") == []


def test_configured_jars_win_over_the_resolved_ones(tmp_path, monkeypatch):
    listed = tmp_path / "s3a.classpath"
    listed.write_text("/m2/hadoop-aws.jar\n")
    monkeypatch.setattr(history, "S3A_CLASSPATH", str(listed))

    assert filesystem_jars("s3a://history/fleet", ("/opt/jars/aws.jar",)) == ["/opt/jars/aws.jar"]


def test_without_make_s3a_no_jars_are_invented(tmp_path, monkeypatch):
    monkeypatch.setattr(history, "S3A_CLASSPATH", str(tmp_path / "absent.classpath"))

    assert filesystem_jars("s3a://history/fleet") == []
