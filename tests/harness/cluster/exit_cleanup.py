"""Nothing left behind when Python exits (the lab: not installed): the local clusters still running are stopped
at exit, and on SIGTERM or SIGHUP where nobody handles them yet.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading

log = logging.getLogger(__name__)

_live_clusters: set = set()  # anything with stop() and base_dir


def track(cluster) -> None:
    """Stop the cluster when Python exits, unless forget() was called for it before."""
    _live_clusters.add(cluster)
    _exit_on_termination_signals()


def forget(cluster) -> None:
    _live_clusters.discard(cluster)


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_live_clusters):
        try:
            cluster.stop()
        except Exception:
            log.exception("Could not stop the local Kafka cluster in %s", cluster.base_dir)


def _exit_on_termination_signals() -> None:
    """On SIGTERM and SIGHUP, where nobody handles them yet, stop the clusters before dying of the signal.

    Dying as before matters: a SystemExit raised in the middle of a test would only fail that test.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _stop_live_clusters_then_die)


def _stop_live_clusters_then_die(signum, frame) -> None:
    _stop_live_clusters()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
