"""`status --direct`: one pass that reads and decides (the aggregator asked) but writes nothing."""

from __future__ import annotations

from ..act.snapshot import Snapshot
from ..common import deadline, records
from ..common.errors import RetryableAdminError
from ..loop import Sidecar


def look(sidecar: Sidecar, timeout: float) -> Snapshot:
    """The snapshot a pass would publish, read-only: on a cluster where no sidecar ran, not even the sidecars'
    state topic or the pipeline's is created. Each read of the cluster ends within `timeout` seconds;
    AdminError when the cluster could not be read."""
    with deadline.within(timeout, "status --direct"):
        all_records = records.parse(sidecar.store.read_all(create=False))
        observation = sidecar.observer.observe(all_records, sidecar.clock(), sidecar.guarded, publish_own=False)
    if observation.error is not None:
        raise RetryableAdminError(observation.error)
    decision = sidecar.decider.decide(observation)  # the aggregator's answer: within poll.timeout, not `timeout`
    sidecar.replication.show(decision.replication)  # what a pass would write, shown rather than written
    with deadline.within(timeout, "status --direct"):
        sidecar.quota_writer.look(decision.client_quotas, all_records)
        sidecar.cordoner.read()
    sidecar.publish()
    return sidecar.snapshot()
