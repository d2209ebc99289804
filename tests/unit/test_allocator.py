import gc
import threading
import weakref

import psutil
import pytest

from quota_sidecar.common import allocator

MiB = 1 << 20


@pytest.mark.skipif(allocator._TRIM is None, reason="a C library without malloc_trim (musl): nothing to give back")
def test_the_pages_a_thread_freed_go_back_to_the_system():
    """A burst of allocations in one thread (its own malloc arena), freed but for one in a hundred: glibc keeps the
    pages, as the agent's after a cut-off; the trim gives them back."""
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


def test_cyclic_garbage_of_the_old_generation_goes_with_the_pass():
    """kafka-python's poll that times out leaves an error in a cycle with its traceback's frames; one still alive at
    a young collection reaches the old generation, which Python collects rarely. The pass's collection takes it."""

    class Future:
        pass

    def poll_that_times_out():
        future = Future()
        try:
            raise TimeoutError("Timed out after 49 ms")
        except TimeoutError as error:
            future.error = error  # the error's traceback holds this frame, which holds the future, which holds it
        return future

    automatic = gc.isenabled()
    gc.disable()  # no automatic collection may take the cycle before the pass does
    try:
        future = poll_that_times_out()
        gone = weakref.ref(future)
        gc.collect(1)  # alive at a young collection: it moves to the old generation
        assert any(item is future for item in gc.get_objects(2))
        del future
        gc.collect(1)
        assert gone() is not None  # garbage, and still there: only a full collection takes it
        allocator.give_back_free_memory()
        assert gone() is None
    finally:
        if automatic:
            gc.enable()
