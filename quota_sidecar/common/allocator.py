"""Memory given back after each pass: cyclic garbage collected, then the free pages returned to the system.

kafka-python 3.0's consumer leaves a reference cycle behind each poll that waits without records (its
KafkaTimeoutError holds, through its traceback, the frame that holds the future that holds the error): tens a second
in an agent. Those still alive at a young collection reach the old generation, which Python collects only once a
quarter of it is new: in a cut-off (requests that wait longer, more of them) ~100,000 objects of garbage piled up
there and the arenas they filled stayed (issue 19's soak: +5 MiB an agent). So each pass collects all generations.

glibc's malloc gives each thread that allocates an arena of its own and keeps the pages it freed for later:
malloc_trim(0) returns every arena's free pages (3-9 ms here after a 20 MiB burst). Another C library (musl) has no
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
