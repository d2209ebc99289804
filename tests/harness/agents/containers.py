"""The project's images (make image) run with the docker CLI, locked down as the chart runs them: uid 10001,
read-only root filesystem, /tmp a tmpfs, the host's network (the engine of deploy/docker-engine.sh has no
bridge), the broker's data dir mounted read-only. For tests/docker and benchmarks/image_footprint.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import quota_sidecar

ROOT = Path(__file__).resolve().parents[3]
VERSION = quota_sidecar.__version__
AGENT, SPARK, KAFKA = (f"{name}:{VERSION}" for name in ("quota-sidecar", "quota-sidecar-spark", "quota-sidecar-kafka"))
PROJECT_ENGINE = ROOT / "build" / "docker" / "docker.sock"


def docker_environment() -> dict[str, str]:
    """os.environ with DOCKER_HOST: the one given, else the project's engine when its socket exists."""
    env = dict(os.environ)
    if "DOCKER_HOST" not in env and PROJECT_ENGINE.exists():
        env["DOCKER_HOST"] = f"unix://{PROJECT_ENGINE.resolve()}"
    return env


def why_not(images: tuple[str, ...] = (AGENT, SPARK, KAFKA)) -> str | None:
    """None when a Docker engine answers and has the images; else the one-line reason to skip."""
    if shutil.which("docker") is None:
        return "no docker CLI (Debian: apt-get install docker.io)"
    env = docker_environment()
    if subprocess.run(["docker", "version"], env=env, capture_output=True).returncode != 0:
        return "no Docker engine answers (make test-docker starts one as root)"
    missing = [image for image in images
               if subprocess.run(["docker", "image", "inspect", image], env=env, capture_output=True).returncode]
    return f"images missing: {', '.join(missing)} (make image)" if missing else None


def docker(*arguments: str, check: bool = True, timeout: float = 120) -> str:
    done = subprocess.run(["docker", *arguments], env=docker_environment(), capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode:
        raise RuntimeError(f"docker {' '.join(arguments[:2])}: {done.stderr.strip()}")
    return done.stdout


def readable(directory: Path) -> Path:
    """The directory and its files readable by the images' uid 10001 (pytest's tmp dirs are the caller's only)."""
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


@dataclass
class Container:
    name: str

    def logs(self) -> str:
        """Its output and its errors, as written (the docker CLI gives them back on its own two)."""
        done = subprocess.run(["docker", "logs", self.name], env=docker_environment(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)
        return done.stdout

    def running(self) -> bool:
        return docker("inspect", "-f", "{{.State.Running}}", self.name, check=False).strip() == "true"

    def exec(self, *command: str, check: bool = True) -> str:
        return docker("exec", self.name, *command, check=check)

    def rss_bytes(self) -> int:
        """The resident memory of every process in the container, summed (VmRSS, /proc). A process gone between the
        glob and its read counts nothing."""
        script = ("for f in /proc/[0-9]*/status; do sed -n 's/^VmRSS:[[:space:]]*\\([0-9]*\\) kB/\\1/p' $f "
                  "2>/dev/null; done; true")
        return 1024 * sum(int(line) for line in self.exec("sh", "-c", script).split())

    def inspect(self, template: str) -> str:
        return docker("inspect", "-f", template, self.name).strip()

    def remove(self) -> None:
        docker("rm", "-f", "-v", self.name, check=False)


def run(image: str, *arguments: str, mounts: dict[str, tuple[str, bool]] | None = None,
        env: dict[str, str] | None = None, entrypoint: str | None = None, network: str = "host",
        hosts: dict[str, str] | None = None, restart: bool = False) -> Container:
    """`docker run -d` of `image` locked down; mounts: host path -> (container path, read-only); hosts: names
    for /etc/hosts -> their addresses; restart: started again when it exits, as the kubelet does (Always)."""
    name = f"quota-sidecar-test-{uuid.uuid4().hex[:8]}"
    options = ["--name", name, "--network", network, "--read-only", "--user", "10001:10001",
               "--tmpfs", "/tmp:rw,exec,size=1g,mode=1777", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges"]
    for host, (inside, read_only) in (mounts or {}).items():
        options += ["--volume", f"{host}:{inside}:{'ro' if read_only else 'rw'}"]
    for key, value in (env or {}).items():
        options += ["--env", f"{key}={value}"]
    for host_name, address in (hosts or {}).items():
        options += ["--add-host", f"{host_name}:{address}"]
    if entrypoint is not None:
        options += ["--entrypoint", entrypoint]
    if restart:
        options += ["--restart", "always"]
    docker("run", "-d", *options, image, *arguments)
    return Container(name)
