"""Each image's size and the sidecar's resident memory in it, against a one-broker local cluster.

    DOCKER_HOST=unix://$PWD/build/docker/docker.sock .venv/bin/python benchmarks/image_footprint.py [SECONDS]

Needs `make image` and a Docker engine (deploy/docker-engine.sh start). Each sidecar runs as the chart runs it
(tests/harness/containers.py: uid 10001, read-only root, /tmp a tmpfs), polls every 2 s against a limit every
volume violates (the throttle engaged: every part of the pass works), and its RSS (every process in the
container, VmRSS summed) is sampled every 2 s for SECONDS (60) after its first successful pass; the
figures are the median and the peak. Both decide through one `quota-sidecar aggregate` run here, outside the
images (harness.aggregator: no image runs it yet), its pipeline the same cluster (the agents' default); its
memory is benchmarks/memory.py's. Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import containers  # noqa: E402
from harness.aggregator import Aggregator  # noqa: E402
from harness.local_cluster import LocalKafkaCluster  # noqa: E402
from harness.ports import free_loopback_ports  # noqa: E402
from harness.waiting import eventually  # noqa: E402
from quota_sidecar.configuration.properties import PREFIX  # noqa: E402

MiB = 1 << 20


def sidecar(image: str, cluster: LocalKafkaCluster, work: Path, port: int, **extra) -> containers.Container:
    log_dir = cluster.log_dirs(1)[0]
    config = work / f"config-{port}"
    config.mkdir()
    properties = {"kafka.admin.bootstrap.servers": cluster.bootstrap_servers, "http.host": "127.0.0.1",
                  "http.port": port, "storage.check.interval": "PT2S", "broker.id": 1,
                  "storage.per.volume.limit.min.available.bytes": 10 ** 18, "storage.local.log.dirs": log_dir, **extra}
    (config / "sidecar.properties").write_text("".join(f"{PREFIX}{k}={v}\n" for k, v in properties.items()))
    containers.readable(config)
    return containers.run(image, "run", "--config", "/etc/quota-sidecar/sidecar.properties",
                          mounts={str(config): ("/etc/quota-sidecar", True), log_dir: (log_dir, True)})


def ready(port: int) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def sample(container: containers.Container, seconds: float) -> list[int]:
    samples, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append(container.rss_bytes())
        time.sleep(2)
    return samples


def size(image: str) -> int:
    return int(containers.docker("image", "inspect", "-f", "{{.Size}}", image).strip())


def main(seconds: float = 60.0) -> None:
    reason = containers.why_not()
    if reason:
        sys.exit(f"image_footprint: {reason}")
    rows = []
    with tempfile.TemporaryDirectory() as work, LocalKafkaCluster(brokers=1) as cluster, \
            Aggregator(cluster.bootstrap_servers, Path(work) / "aggregator") as aggregator:
        aggregator.warm_up()
        started = []
        try:
            port, = free_loopback_ports(1)
            full = sidecar(containers.FULL, cluster, Path(work), port)
            started.append(full)
            eventually(lambda: ready(port), timeout=300, what="the full sidecar ready", every=2)
            rows.append((containers.FULL, "the agent (`quota-sidecar run`)", sample(full, seconds)))
            full.remove()

            port, = free_loopback_ports(1)
            thin = sidecar(containers.THIN, cluster, Path(work), port)
            started.append(thin)
            eventually(lambda: ready(port), timeout=300, what="the thin sidecar ready", every=2)
            rows.append((containers.THIN, "the agent (`quota-sidecar run`)", sample(thin, seconds)))
        finally:
            for container in started:
                container.remove()
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print("| image | size | what runs | RSS median | RSS peak |\n|---|---|---|---|---|")
    for image, what, samples in rows:
        name = image.split(" ")[0]
        print(f"| `{image}` | {size(name) / MiB:.0f} MiB | {what} | {statistics.median(samples) / MiB:.0f} MiB "
              f"| {max(samples) / MiB:.0f} MiB |")
    print(f"| `{containers.KAFKA}` | {size(containers.KAFKA) / MiB:.0f} MiB | Kafka's broker jars and a JRE | | |")
    print(f"\nload average (1, 5, 15 min) after: {load}; {len(rows[0][2])} samples per sidecar over {seconds:.0f} s")


if __name__ == "__main__":
    main(*(float(argument) for argument in sys.argv[1:2]))
