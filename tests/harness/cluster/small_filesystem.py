"""Small size-limited filesystems for log dirs, so that tests can fill a disk for real (the lab: not installed).

tmpfs where it can be mounted, else an ext4 image on a loop device; both need root.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.cluster.kafka_builds import LocalClusterError


class SmallFilesystemUnavailable(LocalClusterError):
    """Neither tmpfs nor a loop-mounted ext4 image could be mounted (not root, no loop devices...)."""


def mount_small_filesystem(mountpoint: Path, size: int, mounted: list[Path]) -> None:
    """Mount a filesystem of `size` bytes on the (empty) directory mountpoint; add it to `mounted` once mounted."""
    tmpfs_error = run_command(["mount", "-t", "tmpfs", "-o", f"size={size}", "quota-sidecar-tmpfs", str(mountpoint)])
    if tmpfs_error is None:
        mounted.append(mountpoint)
        return
    image = mountpoint.with_name(mountpoint.name + ".ext4")
    with open(image, "wb") as image_file:
        image_file.truncate(size)
    # -m 0: no blocks reserved for root, so the broker (root here) sees the same free space as everyone.
    ext4_error = run_command(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)]) or run_command(
        ["mount", "-o", "loop", str(image), str(mountpoint)]
    )
    if ext4_error is not None:
        raise SmallFilesystemUnavailable(
            f"cannot mount a {size}-byte filesystem at {mountpoint}: "
            f"tmpfs: {tmpfs_error}; ext4 image on a loop device: {ext4_error}"
        )
    mounted.append(mountpoint)
    # Kafka takes every directory in a log dir for a partition: a broker with lost+found in one fails to start.
    (mountpoint / "lost+found").rmdir()


def unmount(mountpoints: list[Path]) -> dict[Path, str]:
    """Unmount them, last mounted first: {mountpoint: why not} for those still mounted."""
    failures = {}
    for mountpoint in reversed(mountpoints):
        error = run_command(["umount", str(mountpoint)])
        if error is not None:
            failures[mountpoint] = error
    return failures


def run_command(command: list[str]) -> str | None:
    """Run a system command: None when it succeeded, else why it failed."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if result.returncode == 0:
        return None
    return result.stderr.strip() or f"exit code {result.returncode}"
