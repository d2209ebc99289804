"""Memory given back after each pass: cyclic garbage collected, then the free pages returned to the system.

kafka-python 3.0's consumer leaves a reference cycle behind each poll that waits without records (its
KafkaTimeoutError holds, through its traceback, the frame that holds the future that holds the error). Most die young;
those a fetch in flight kept alive (kafka_client.FREQUENT_POLLS_REQUEST_TIMEOUT_MS) are old when it lets them go, and
Python collects the old generation only once a quarter of it is new: after a broker is cut off, that garbage waits
there for long. So each pass on time collects all generations (docs/benchmarks.md, Fault soak, has the cost).

glibc's malloc gives each thread that allocates an arena of its own and keeps the pages it freed for later:
malloc_trim(0) returns every arena's free pages, in a few milliseconds. Another C library (musl) has no
malloc_trim: then only the collection is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc


def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def give_back_free_memory() -> None:
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
