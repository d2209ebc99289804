"""A container of the chart as rendered, run here as the kubelet would run it (make test-chart)."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from harness.agents.chart import container_env, containers_named, expand, render, volume_files
from harness.agents.sidecar_process import EXECUTABLE
from harness.waiting import eventually


def mounted(path: str, mounts: dict[str, str]) -> str:
    """A path in the container as it is here: under the directory standing for the mount that holds it."""
    holders = [mount for mount in mounts if path == mount or path.startswith(mount + "/")]
    if not holders:
        return path
    mount = max(holders, key=len)
    return mounts[mount] + path[len(mount):]


class RenderedContainer:
    """A container of the example as rendered (by default the agent of the StatefulSet; the aggregator is the
    Deployment's), run as the kubelet would: its command, args and env, its ConfigMap and Secrets as files at their
    mount paths (under a temp dir: no root filesystem of ours is touched; a Secret the chart only names comes from
    `secrets`), the broker's data dir at the data volume's mount path, pod ordinal 1 in the pod-index label, other
    fieldRefs from `fields` (fieldPath -> value)."""

    def __init__(self, helm, work: Path, settings: list[str], secrets: dict[str, dict[str, str]] | None = None,
                 kind: str = "StatefulSet", name: str = "quota-sidecar", fields: dict[str, str] | None = None,
                 namespace: str = "default"):
        self.documents = render(helm, ["example.enabled=true", *settings], namespace=namespace)
        workload = next(d for d in self.documents if d["kind"] == kind)
        self.container, = containers_named([workload], name)
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        work = work / name
        work.mkdir()
        self.mounts = {}  # mountPath in the container -> the directory that stands for it here
        files, named_paths = {}, []
        for mount in self.container["volumeMounts"]:
            volume = volumes.get(mount["name"])
            if volume is None:  # the volume claim template: the broker's data volume
                assert mount["readOnly"]
                continue
            directory = work / mount["name"]
            directory.mkdir()
            self.mounts[mount["mountPath"]] = str(directory)
            if "secret" in volume or "configMap" in volume:
                named = (secrets or {}).get(volume.get("secret", {}).get("secretName"))
                files[mount["mountPath"]] = named or volume_files(self.documents, volume)
            if "emptyDir" not in volume:  # /tmp holds the lab's own paths (the broker's log dirs): kept as they are
                named_paths.append(mount["mountPath"])
        for mount_path, contents in files.items():  # the properties name paths under the mounts: ours here
            for file_name, content in contents.items():
                for path in named_paths:
                    content = content.replace(path + "/", self.mounts[path] + "/")
                Path(self.mounts[mount_path], file_name).write_text(content)
        pod_index = {"metadata.labels['apps.kubernetes.io/pod-index']": "1"}
        env = container_env(self.container, {**pod_index, **(fields or {})})
        self.env = {name: mounted(value, self.mounts) for name, value in env.items()}  # HOME=/tmp: the emptyDir
        self.command = [mounted(expand(item, self.env), self.mounts)
                        for item in self.container["command"] + self.container["args"]]
        assert self.command[0] == "quota-sidecar"
        self.log_path = work / f"{name}.log"
        self.process = None

    def __enter__(self) -> RenderedContainer:
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen([str(EXECUTABLE), *self.command[1:]], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env={**os.environ, **self.env}, start_new_session=True)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=60)

    def log(self) -> str:
        return self.log_path.read_text()

    def run(self, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run it to its end (a Job's container): its exit code and output."""
        return subprocess.run([str(EXECUTABLE), *self.command[1:]], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env={**os.environ, **self.env})

    def get(self, url: str, context: ssl.SSLContext | None = None) -> int:
        """The status of a GET; 0 while nothing listens. Not retried once the process has exited."""
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.container['name']} exited:\n{self.log()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5, context=context) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except urllib.error.URLError:
            return 0

    def wait_ready(self, base: str) -> None:
        """The kubelet's view: the readiness probe answers 200, then the liveness probe, at the probes' port; then
        the strict readiness: the first decision has come."""
        readiness = self.container["readinessProbe"]["httpGet"]["path"]
        try:
            eventually(lambda: self.get(base + readiness) == 200, timeout=240, what=f"{readiness} answering 200",
                       every=1)
            assert self.get(base + self.container["livenessProbe"]["httpGet"]["path"]) == 200
            eventually(lambda: self.get(base + "/readyz?strict=1") == 200, timeout=240, what="the first decision",
                       every=1)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.log()[-3000:]}") from None

    def set_override(self, base: str, token: str, context: ssl.SSLContext | None = None) -> int:
        override = urllib.request.Request(base + "/throttle/1", method="PUT", data=b'{"rate": 5000000}',
                                          headers={"Authorization": f"Bearer {token}",
                                                   "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(override, timeout=10, context=context) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code


def violated_limit(log_dir: Path) -> list[str]:
    """Settings of a sidecar beside `log_dir`'s broker whose limit every volume violates: producers throttled."""
    return ["config.storage\\.check\\.interval=PT2S",
            "config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes=1000000000000000000",
            f"dataVolume.mountPath={log_dir.parent}", f"dataVolume.logDirs={log_dir}"]


def status(url: str, context: ssl.SSLContext | None = None) -> dict:
    with urllib.request.urlopen(url + "/status", timeout=5, context=context) as response:
        return json.load(response)
