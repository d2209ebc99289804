"""Each image's size and the resident memory of what it runs, against a one-broker local cluster: the agent
(quota-sidecar) decided for by the aggregator (quota-sidecar-spark).

    DOCKER_HOST=unix://$PWD/build/docker/docker.sock .venv/bin/python benchmarks/image_footprint.py [SECONDS]

Needs `make image` and a Docker engine (deploy/docker-engine.sh start). Both run as the chart runs them
(tests/harness/agents/containers.py: uid 10001, read-only root, /tmp a tmpfs); the agent polls every 2 s against a limit
every volume violates (the throttle engaged: every part of the pass works), its pipeline the same cluster (the
agents' default), where the aggregator decides. Their RSS (every process in the container, VmRSS summed) is sampled
every 2 s for SECONDS (60) after the agent's first successful pass; the figures are the median and the peak.
Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness.agents import containers  # noqa: E402
from harness.cluster.local_cluster import LocalKafkaCluster  # noqa: E402
from harness.cluster.ports import free_loopback_ports  # noqa: E402
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
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz?strict=1", timeout=5) as response:  # decided
            return response.status == 200
    except OSError:
        return False


def size(image: str) -> int:
    return int(containers.docker("image", "inspect", "-f", "{{.Size}}", image).strip())


def aggregator(cluster: LocalKafkaCluster, work: Path) -> containers.Container:
    config = work / "config-aggregator"
    config.mkdir()
    (config / "aggregator.properties").write_text(
        f"{PREFIX}kafka.admin.bootstrap.servers={cluster.bootstrap_servers}\n"
        f"{PREFIX}aggregator.checkpoint.location=/tmp/checkpoint\n")
    containers.readable(config)
    return containers.run(containers.SPARK, "aggregate", "--config", "/etc/quota-sidecar/aggregator.properties",
                          mounts={str(config): ("/etc/quota-sidecar", True)})


def main(seconds: float = 60.0) -> None:
    reason = containers.why_not()
    if reason:
        sys.exit(f"image_footprint: {reason}")
    started = []
    with tempfile.TemporaryDirectory() as work, LocalKafkaCluster(brokers=1) as cluster:
        try:
            deciding = aggregator(cluster, Path(work))
            started.append(deciding)
            eventually(lambda: "deciding for the agents of" in deciding.logs(), timeout=300,
                       what="the aggregator deciding", every=2)
            port, = free_loopback_ports(1)
            agent = sidecar(containers.AGENT, cluster, Path(work), port)
            started.append(agent)
            eventually(lambda: ready(port), timeout=300, what="the agent ready", every=2)
            samples = {container.name: [] for container in started}
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for container in started:
                    samples[container.name].append(container.rss_bytes())
                time.sleep(2)
            rows = [(containers.SPARK, "the aggregator (`quota-sidecar aggregate`), deciding for one agent",
                     samples[deciding.name]),
                    (containers.AGENT, "the agent (`quota-sidecar run`)", samples[agent.name])]
        finally:
            for container in started:
                container.remove()
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print("| image | size | what runs | RSS median | RSS peak |\n|---|---|---|---|---|")
    for image, what, taken in rows:
        print(f"| `{image}` | {size(image) / MiB:.0f} MiB | {what} | {statistics.median(taken) / MiB:.0f} MiB "
              f"| {max(taken) / MiB:.0f} MiB |")
    print(f"| `{containers.KAFKA}` | {size(containers.KAFKA) / MiB:.0f} MiB | Kafka's broker jars and a JRE | | |")
    print(f"\nload average (1, 5, 15 min) after: {load}; {len(rows[0][2])} samples each over {seconds:.0f} s")


if __name__ == "__main__":
    main(*(float(argument) for argument in sys.argv[1:2]))
