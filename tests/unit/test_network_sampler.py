"""The network sampler's thread, on this host's real interfaces: psutil's counters, a name no interface has."""

import time

from harness.waiting import eventually
from quota_sidecar.observe.netstats import NetworkSampler


def test_the_sampler_keeps_rates_of_a_real_interface_until_stopped():
    sampler = NetworkSampler("lo", window=10.0, period=0.01).start()
    try:
        sent, received = eventually(sampler.rates, timeout=5, every=0.01)
        assert sent >= 0 and received >= 0 and sampler.error is None
    finally:
        sampler.stop()
    kept = len(sampler.samples)
    time.sleep(0.1)  # ten periods: a sampler still running would have added some
    assert kept >= 2 and len(sampler.samples) == kept


def test_an_interface_that_does_not_exist_gives_no_rates_and_says_why():
    sampler = NetworkSampler("no-such-if0", window=10.0, period=0.01).start()
    try:
        eventually(lambda: sampler.error is not None, timeout=5, every=0.01)
        assert sampler.rates() is None and "'no-such-if0' not found" in sampler.error
    finally:
        sampler.stop()
