import threading

import psutil
import pytest

from quota_sidecar.common import allocator

MiB = 1 << 20


@pytest.mark.skipif(allocator._TRIM is None, reason="a C library without malloc_trim (musl): nothing to give back")
def test_the_pages_a_thread_freed_go_back_to_the_system():
    """A burst of allocations in one thread (its own malloc arena), freed but for one in a hundred: glibc keeps the
    pages, as the agent's after a cut-off (+5.7 MiB in the soak); the trim gives them back."""
    kept = []

    def burst():
        chunks = [bytes(1024) + bytes([i % 256]) for i in range(40_000)]  # ~40 MiB of malloc'd 1 KiB objects
        kept.extend(chunks[::100])  # one in a hundred stays: no free space at the arena's top to trim by itself

    thread = threading.Thread(target=burst)
    thread.start()
    thread.join()
    before = psutil.Process().memory_info().rss
    allocator.give_back_free_memory()
    after = psutil.Process().memory_info().rss
    assert before - after > 20 * MiB, (before / MiB, after / MiB)
    assert len(kept) == 400
