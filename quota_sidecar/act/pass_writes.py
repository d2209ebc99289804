"""What a pass writes, in which order: the local verdict and the disk guard before the pass reads the cluster;
after its decision the client quotas, the descent's rate, the replication throttles and the cordons; then the
pass's lines (report_pass)."""

from __future__ import annotations

import logging
from datetime import datetime

from ..common import records
from ..common.errors import AdminError
from ..common.failure_report import FailureReport
from ..common.observation import Observation, ReplicationObservation
from ..decide.decider import Decision
from ..decide.throttles import ReplicationDecision
from .quota_writes import QuotaWriter
from .snapshot import Counters

log = logging.getLogger("quota_sidecar.loop")  # the loop's lines, where operators read them


class PassWrites:
    """`verdict`, `guard`, `replication`, `cordoner`: act/local_verdict.py, act/local_guard.py, act/replication.py,
    act/cordoning.py, or the ones of an absent feature, that write nothing."""

    def __init__(self, quota_writer: QuotaWriter, store, verdict, guard, replication, cordoner, counters: Counters,
                 polls: FailureReport, replication_report: FailureReport):
        self.quota_writer, self.store = quota_writer, store
        self.verdict, self.guard, self.replication, self.cordoner = verdict, guard, replication, cordoner
        self.counters = counters
        self.polls, self.replication_report = polls, replication_report

    def before_reading(self, all_records: records.Records, now: datetime) -> bool:
        """The local verdict's quotas first (local_verdict.py; renewed by every pass while a dir stays at the limit,
        so that failed polls never age them into the fallback), then the disk guard while a dir is at or near
        the limit (local_guard.py). Whether anything was written."""
        writes = self.counters.writes
        self.verdict.write(all_records, now, "before the pass reads the cluster")
        guarded = self.guard.keep(all_records, now)
        return guarded or self.counters.writes > writes

    def after(self, decision: Decision, observation: Observation, all_records: records.Records | None,
              violated: set[int]) -> None:
        """A decision's writes, then the pass's lines. `all_records` None: they could not be read, nothing is
        written; `violated`: the brokers whose volumes violate the limit as the decider knows them."""
        write_error = None
        if all_records is not None:  # after a failed poll too: a fallback factor must reach the cluster
            try:
                # A verdict that holds now (this agent's, or another's) judges denser samples than the aggregator:
                # nothing may lift it. A quota written from a later look than this decision's (by this sidecar or
                # another) is left as it is.
                undecided = (decision.error is not None and not decision.entered_fallback) or \
                    self.verdict.held_anywhere()
                self.quota_writer.apply(decision.written_quotas or decision.client_quotas, all_records,
                                        tighten_only=undecided, seen_at=decision.looked_at,
                                        stepped_from=decision.stepped_from)
                if decision.error is None:
                    self.record_descent(decision.descent_rate, records.descent_rate(all_records))
                if decision.replication is not None:
                    self.replication_throttles(decision.replication, observation.replication, all_records,
                                               violated, decision.at)
                if decision.error is None:  # a failed poll changes no cordon
                    self.cordoner.apply(decision.violations, all_records)
            except AdminError as error:  # the cluster went away since the poll, or the deadline ran out
                self.counters.pass_failures += 1
                write_error = str(error)
        report_pass(decision, write_error, self.polls, self.replication_report)

    def replication_throttles(self, decision: ReplicationDecision, observation: ReplicationObservation | None,
                              all_records: records.Records, violated: set[int], now: datetime) -> None:
        self.replication.apply(decision, observation, all_records, violated, now)

    def record_descent(self, rate: float | None, recorded: float | None) -> None:
        """The rate the descent began from, for every agent (records.DESCENT): written when it begins or grows by
        a tenth, deleted when it ends."""
        if rate is None and recorded is not None:
            self.store.delete(records.key(records.DESCENT))
        elif rate is not None and (recorded is None or rate > 1.1 * recorded):
            self.store.write_many({records.key(records.DESCENT): {"rate": rate}})


def report_pass(decision: Decision, write_error: str | None, polls: FailureReport,
                replication: FailureReport) -> None:
    """A pass's lines: the poll's failure, with the writes' when they failed for another reason; the fallback
    entered; the replication part's failure, or its success again."""
    if decision.error is None:
        polls.success()
        if write_error is not None:
            log.warning("pass failed while writing: %s", write_error)
    else:
        also = "" if write_error is None or write_error in decision.error else f"; writing failed: {write_error}"
        polls.failure(decision.error + also)
    if decision.entered_fallback:
        log.warning("throttle factor fallback %.3f applied: no valid factor since %s (%s)",
                    decision.throttle_factor, decision.valid_from, decision.error)
    if decision.replication_error is not None:
        replication.failure(decision.replication_error)
    elif decision.replication is not None:
        replication.success()
