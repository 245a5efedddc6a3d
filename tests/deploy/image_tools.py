"""Build the image with podman and run programs in its file system (tests/deploy/test_image.py).

``podman run`` is refused by this sandbox's cgroups, so a program "runs in the image" here as
the image would start it, without a container runtime: ``chroot`` into the mounted file
system, as the image's ``User``, with exactly the image's ``Env`` and ``WorkingDir``, through
its ``Entrypoint``. The network is the host's (loopback only in these tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.deploy.layout import ROOT

BUILD_TIMEOUT = 1200


def podman(*args: str, timeout: float = 300) -> str:
    result = subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        ["podman", *args],  # noqa: S607 - podman from PATH, as make image installs it
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"podman {args[0]} failed: {result.stderr[-4000:]}")
    return result.stdout.strip()


def build_image(tag: str, revision: str, source: str) -> str:
    """``scripts/image.sh build``: ``podman build --isolation chroot`` of the Containerfile on
    the debootstrap base (scripts/image-base.sh); returns the image id."""
    result = subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(ROOT / "scripts" / "image.sh"), "build", tag],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
        env={**os.environ, "REVISION": revision, "SOURCE": source},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def image_script(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``scripts/image.sh ARGS`` (e.g. ``report TAG ARCHIVE``), its output captured."""
    return subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(ROOT / "scripts" / "image.sh"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def git(*args: str) -> str:
    """A git query about this checkout ("" when it fails, e.g. no remote)."""
    result = subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        ["git", *args],  # noqa: S607 - git from PATH
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else ""


def inspect(image: str) -> dict[str, Any]:
    loaded = json.loads(podman("image", "inspect", image))
    assert isinstance(loaded, list)
    found: dict[str, Any] = loaded[0]
    return found


@contextmanager
def mounted(image: str) -> Iterator[Path]:
    """The image's file system, from a created (never started) container, mounted read-write;
    the container is removed afterwards."""
    container = podman("create", image)
    try:
        yield Path(podman("mount", container))
    finally:
        podman("umount", container)
        podman("rm", container)


@dataclass(frozen=True)
class ImageProcess:
    """How the image starts a process, read from its configuration."""

    rootfs: Path
    user: str
    env: Mapping[str, str]
    workdir: str
    entrypoint: Sequence[str]

    @classmethod
    def of(cls, rootfs: Path, config: Mapping[str, Any]) -> ImageProcess:
        env = dict(entry.split("=", 1) for entry in config["Env"])
        return cls(rootfs, config["User"], env, config["WorkingDir"], config["Entrypoint"])

    def argv(self, args: Sequence[str], extra_env: Mapping[str, str]) -> list[str]:
        """chroot as the image's user, with only the image's environment (plus ``extra_env``),
        in its working directory, running ``args`` (prefix :attr:`entrypoint` to go through
        the entry point, as ``CMD`` does; a ``HEALTHCHECK`` command does not)."""
        env = [f"{k}={v}" for k, v in (dict(self.env) | dict(extra_env)).items()]
        shell = 'cd "$0" && exec "$@"'
        return [
            "chroot",
            f"--userspec={self.user}",
            str(self.rootfs),
            "/usr/bin/env",
            "-i",
            *env,
            "/bin/sh",
            "-c",
            shell,
            self.workdir,
            *args,
        ]

    def run(
        self, args: Sequence[str], extra_env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
            self.argv(args, extra_env or {}),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, args: Sequence[str], extra_env: Mapping[str, str]) -> subprocess.Popen[str]:
        return subprocess.Popen(  # noqa: S603 - fixed argv of a local tool, no shell
            self.argv(args, extra_env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


def wait_healthy(image: ImageProcess, env: Mapping[str, str], deadline_s: float) -> float:
    """Seconds until the image's own health check passes (polled every 0.1 s)."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        if image.run(["fetcher-healthcheck"], env, timeout=10).returncode == 0:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"not healthy within {deadline_s} s")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")
