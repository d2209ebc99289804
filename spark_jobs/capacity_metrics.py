"""The aggregator's Prometheus endpoint (`aggregator.metrics.port`): each volume's days to the storage limit from
the latest forecast of the history, so that an alert can say "full in 9 days" rather than "less than 5 GiB free".

The forecast is the capacity report's (``report.build`` over the last FORECAST_SINCE of the history), made at the
aggregator's start and every FORECAST_EVERY in a thread of its own: the history grows by one append every few
minutes and a retention cycle takes hours or days, so a fresher one would say the same. Days count from the moment of the scrape to the
forecast's date of the limit. A volume that is not filling gets +Inf: it is listed, and no threshold alerts on it.
"""
from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Callable

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from quota_sidecar.common.periodic import PeriodicWorker
from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs import report, session

_log = logging.getLogger(__name__)
FORECAST_EVERY = timedelta(hours=1)
RETRY_AFTER = timedelta(minutes=5)  # after none made: the history's first append comes history.interval after start
FORECAST_SINCE = timedelta(days=30)  # as `quota-sidecar report` by default
DAY = 86400.0
_LABELS = ("cluster", "broker_id", "log_dir")  # broker_id and log_dir as the agents label a volume


class CapacityForecast:
    """The latest forecast's volumes, read by the endpoint's collector; made again in a thread of its own (`start`),
    so that a long forecast of a large history holds up nothing of the aggregator's main loop."""

    def __init__(self, location: str, limit: StorageLimit | None, clock: Callable[[], float] = time.time):
        self.location, self.limit, self.clock = location, limit, clock
        self.volumes: list[dict] = []
        self.made_at: float | None = None  # epoch seconds of the last forecast made
        self.failures = 0
        self._large = None  # the session for much data the forecasts run in (`start`)
        self._worker = PeriodicWorker("capacity-forecast", self._forecast, FORECAST_EVERY.total_seconds(),
                                      wait_first=False)

    def start(self, spark) -> CapacityForecast:
        """Forecasts now, then every FORECAST_EVERY (after RETRY_AFTER when there was none), until `stop`, in one
        session for much data made here: a new one at each forecast would be kept by the driver for good."""
        self._large = session.for_large_data(spark)
        self._worker.start()
        return self

    def stop(self, timeout: float | None = 0.0) -> None:
        """No forecast after this; waits up to `timeout` for one under way to end (None: as long as it takes)."""
        self._worker.stop(timeout)

    def _forecast(self) -> float | None:
        """One forecast; the next after FORECAST_EVERY (the worker's interval), or RETRY_AFTER when none was made."""
        return None if self.refresh(self._large) else RETRY_AFTER.total_seconds()

    def refresh(self, spark) -> bool:
        """One forecast in `spark` (a session for much data: session.for_large_data); whether it was made. A history not written yet (the first append comes history.interval
        after the start) is said at INFO; a failed job is one WARNING, counted, and the last forecast stays."""
        if "://" not in self.location and not os.path.exists(self.location):
            _log.info("capacity forecast: no history at %s yet", self.location)
            return False
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        try:
            built = report.build(spark, self.location, FORECAST_SINCE, self.limit, now, at_risk=timedelta(0))
        except Exception as error:  # Spark's errors come as many types
            self.failures += 1
            _log.warning("capacity forecast of the history at %s failed (tried again in %s): %s", self.location,
                         RETRY_AFTER, str(error).strip().splitlines()[0] if str(error).strip() else
                         type(error).__name__)
            return False
        self.volumes, self.made_at = built["volumes"], now.timestamp()
        _log.info("capacity forecast of %d volumes from the history at %s", len(self.volumes), self.location)
        return True

    def collect(self):
        now = self.clock()
        days = GaugeMetricFamily("quota_sidecar_volume_days_to_limit", "Days until the volume's available bytes "
                                 "reach the storage limit at its net growth over the history (+Inf: not filling)",
                                 labels=_LABELS)
        growth = GaugeMetricFamily("quota_sidecar_volume_growth_bytes_per_day", "The volume's net growth of used "
                                   "bytes per day over the history, through its retention cycles", labels=_LABELS)
        for volume in self.volumes:
            labels = [volume["cluster"], str(volume["broker"]), volume["log_dir"]]
            days.add_metric(labels, _days_between(now, volume["limit_at"]))
            if volume["growth_bytes_per_day"] is not None:
                growth.add_metric(labels, volume["growth_bytes_per_day"])
        yield days
        yield growth
        yield GaugeMetricFamily("quota_sidecar_capacity_forecast_timestamp_seconds", "When the latest forecast "
                                "was made (0: none yet)", value=self.made_at or 0.0)
        yield CounterMetricFamily("quota_sidecar_capacity_forecast_failures", "Forecasts of the history that "
                                  "failed", value=self.failures)


def serve(forecast: CapacityForecast, host: str, port: int) -> int:
    """The endpoint (/metrics), in a daemon thread; the port it listens on (0 picks a free one)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(forecast)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server.server_port


def _days_between(now: float, limit_at: str | None) -> float:
    if limit_at is None:
        return float("inf")
    at = datetime.strptime(limit_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    return (at - now) / DAY
