"""The class-data archives `make class-archives` records are the ones the lab's JVMs can map: with -Xshare:on a
JVM that cannot use its archive (another classpath, another Java, a jar changed since) refuses to start, where
the lab's JVMs would quietly start without it, slower."""

import os
import subprocess
import sys

import pytest

from harness.class_archives import CLASS_ARCHIVES, SPARK, archive_options, class_archive, jvm_options_for
from harness.cluster.kafka_builds import DEFAULT_JVM_OPTIONS, read_classpath
from harness.record_class_archives import RECORDED

pytestmark = [pytest.mark.integration, pytest.mark.harness]
CLASSPATH_ARCHIVES = [name for name in RECORDED if name != SPARK]


@pytest.mark.parametrize("name", CLASSPATH_ARCHIVES)
def test_each_kafka_classpath_maps_its_archive(name):
    assert class_archive(name).is_file(), f"no {class_archive(name)}: run `make class-archives`"
    classpath_file = CLASS_ARCHIVES.parent / f"{name}.classpath"
    done = subprocess.run(["java", "-Xshare:on", *jvm_options_for(classpath_file, DEFAULT_JVM_OPTIONS),
                           "-cp", read_classpath(classpath_file), "-version"], capture_output=True, text=True)
    assert done.returncode == 0 and "sharing" in done.stderr, done.stderr


def test_the_spark_driver_maps_its_archive():
    assert archive_options(SPARK), f"no {class_archive(SPARK)}: run `make class-archives`"
    environment = {**os.environ, "SPARK_SUBMIT_OPTS": " ".join(["-Xshare:on", *archive_options(SPARK)])}
    done = subprocess.run([sys.executable, "-c", "from spark_jobs.session import get_session; "
                           "print(get_session().range(3).count())"], env=environment, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0 and done.stdout.strip().endswith("3"), done.stderr[-2000:]
