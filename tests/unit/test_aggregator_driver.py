"""The aggregator's driver as aggregator.driver.memory makes it: the small driver at the default heap, the JVM's own
collector above it, and what Spark keeps of its micro-batches bounded either way."""

import pytest

from quota_sidecar.configuration.keys import KEYS_BY_NAME
from quota_sidecar.configuration.properties import driver_memory
from spark_jobs.session import MIN_DRIVER_MEMORY, aggregator_settings

RETAINED = ("spark.ui.retainedJobs", "spark.ui.retainedStages", "spark.ui.retainedTasks",
            "spark.sql.ui.retainedExecutions")


def test_the_default_heap_runs_the_serial_collector_and_a_small_code_cache():
    default = KEYS_BY_NAME["aggregator.driver.memory"].default
    settings = aggregator_settings(default, {})

    options = settings["spark.driver.extraJavaOptions"].split()
    assert settings["spark.driver.memory"] == default == MIN_DRIVER_MEMORY == "512m"
    assert "-XX:+UseSerialGC" in options and "-XX:ReservedCodeCacheSize=64m" in options, options
    assert "-XX:TieredStopAtLevel=1" not in options, options  # C2: a small micro-batch's latency needs it


def test_a_larger_heap_runs_the_jvms_own_collector_and_code_cache():
    settings = aggregator_settings("2g", {})

    options = settings["spark.driver.extraJavaOptions"]
    assert settings["spark.driver.memory"] == "2g"
    assert "UseSerialGC" not in options and "ReservedCodeCacheSize" not in options, options


@pytest.mark.parametrize("heap", ["512m", "2g"])
def test_spark_keeps_a_hundred_of_each_kind_of_run_not_a_thousand(heap):
    settings = aggregator_settings(heap, {})

    assert {key: settings[key] for key in RETAINED} == dict.fromkeys(RETAINED, "100")


@pytest.mark.parametrize("raw, heap", [("512m", "512m"), ("768M", "768m"), ("1g", "1g"), (" 4G ", "4g")])
def test_the_heap_is_written_as_spark_writes_it(raw, heap):
    assert driver_memory(raw) == heap


@pytest.mark.parametrize("raw", ["511m", "0g", "1.5g", "512", "512mb", "2 g", ""])
def test_a_heap_spark_would_refuse_or_misread_is_refused(raw):
    with pytest.raises(ValueError):
        driver_memory(raw)
