"""One look at the cluster for a pass: the live brokers, their volumes (with the sidecars' znode volumes), the
quotas in force read as the tenants' rates, and the moves; one Observation, whatever failed."""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Mapping

from ..common import deadline, records
from ..common.errors import AdminError
from ..common.failure_report import FailureReport
from ..common.observation import Entity, Observation, Volume
from ..configuration.settings import SidecarConfig
from .local_watch import LocalWatch, NoWatch, as_volumes, own_volumes

# What the quotas in force mean for the tenants and the descent (decide/quotas.tenant_rates, decide/descent.in_force),
# from what is in force and what the sidecars own: (the tenants' rates, the producers' quotas in force).
RatesInForce = Callable[[Mapping[Entity, Mapping[str, float]], Mapping], tuple[dict, dict]]


class Observer:
    """Reads the cluster for a pass. `replication` observes the moves (act/replication.py, or one that observes
    none); `znodes` exchanges volumes through ZooKeeper (observe/znode_volumes.py, or one that has none)."""

    def __init__(self, config: SidecarConfig, admin, znodes, replication, replication_report: FailureReport,
                 watch: LocalWatch | NoWatch, rates_in_force: RatesInForce):
        self.config, self.admin, self.znodes, self.replication = config, admin, znodes, replication
        self.replication_report = replication_report
        self.watch = watch
        self.rates_in_force = rates_in_force

    def observe(self, all_records: records.Records, now: datetime, guarded: Callable[[], bool],
                publish_own: bool = True) -> Observation:
        """Storage first, then replication while the deadline lasts (the moves' lists are kept up to date
        even when a broker's volumes cannot be read). When both fail, the poll's WARNING is the one line.
        With znode volumes the pass first makes sure its broker's znode holds its newest volumes. `guarded`:
        whether this broker's disk guard is on."""
        brokers, volumes, published, tenants, producer_rates, descent_rate, error = (), (), {}, None, None, None, None
        try:
            brokers = tuple(self.admin.live_broker_ids())
            if self.config.storage_check_enabled:
                volumes = tuple(self.admin.describe_volumes(brokers, now))
                # a lost ZooKeeper session fails the poll like a lost broker
                own = (lambda: self._own_volumes(now)) if publish_own else None
                brokers, volumes, published = self.znodes.exchange(brokers, volumes, now, own)
            # Last: a ZooKeeper-mode broker answers DescribeClientQuotas from ZooKeeper, so without it this waits
            # out the deadline; the poll's error then names what failed first.
            in_force, owned = self.admin.describe_user_quotas(), records.owned(all_records, records.QUOTA)
            tenants, producer_rates = self.rates_in_force(in_force, owned)
            descent_rate = records.descent_rate(all_records)
        except AdminError as failure:
            error = str(failure)
        replication = None
        if not deadline.expired():
            try:
                replication = self.replication.observe(all_records, guarded())
            except AdminError as failure:  # replication waits for the next pass; disk protection goes on
                if error is None:
                    self.replication_report.failure(str(failure))
        if error is not None:
            return Observation(at=now, error=error, replication=replication, tenant_rates=tenants,
                               producer_rates=producer_rates, descent_rate=descent_rate)
        return Observation(at=now, brokers=brokers, volumes=volumes, replication=replication, tenant_rates=tenants,
                           producer_rates=producer_rates, descent_rate=descent_rate,
                           published_volumes=tuple(v for vs in published.values() for v in vs))

    def local_samples(self, now: datetime) -> tuple[Volume, ...]:
        """This broker's local samples as volume measurements for the fill history (its broker id known)."""
        if self.config.broker_id is None:
            return ()
        return as_volumes(self.config.broker_id, [s for samples in self.watch.history().values() for s in samples], now)

    def _own_volumes(self, now: datetime) -> tuple[Volume, ...]:
        """This broker's volumes for its znode: the running watch's newest samples, else read now."""
        if self.watch.running and (latest := self.watch.latest()):
            return as_volumes(self.config.broker_id, latest, now)
        return tuple(own_volumes(self.config.broker_id, self.config.local_watch.log_dirs, now))
