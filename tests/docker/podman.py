"""Podman, driven the way the docs tell people to: build docker/Dockerfile, run the images.

Facts of these machines (../shared/CLIENT-NOTES.md, "Containers"): no registry, so the base
image ``python:3.11-slim`` is made by ``scripts/docker-base`` (debootstrap, cached); every
podman call needs ``--runtime runc --cgroup-manager=cgroupfs`` and explicit ulimits at or below
the hard limits. ``Podman.unavailable()`` says in one line why containers cannot run here.
"""

from __future__ import annotations

import functools
import json
import resource
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]
GLOBAL = ["--runtime", "runc", "--cgroup-manager=cgroupfs"]
BASE_IMAGE = "docker.io/library/python:3.11-slim"


def _limit(which: int, cap: int) -> int:
    hard = resource.getrlimit(which)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


def ulimits() -> list[str]:
    """``--ulimit`` flags at or below this process's hard limits (no CAP_SYS_RESOURCE here)."""
    nofile = _limit(resource.RLIMIT_NOFILE, 65536)
    nproc = _limit(resource.RLIMIT_NPROC, 16384)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def unique(prefix: str) -> str:
    """A container/volume name no other test run (or engineer) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Podman:
    exe: str = "podman"
    made: list[tuple[str, str]] = field(default_factory=list)  # (kind, name) to remove

    def cmd(self, *args: str) -> list[str]:
        return [self.exe, *GLOBAL, *args]

    def __call__(
        self, *args: str, timeout: float = 120, check: bool = True, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            self.cmd(*args), capture_output=True, text=True, timeout=timeout,
            input=None if input is None else input.decode(),
        )  # fmt: skip
        if check and r.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
        return r

    # ------------------------------------------------------------ availability and images

    @classmethod
    @functools.cache
    def unavailable(cls) -> str | None:
        """None when a container runs here, else one line saying why not (asked once)."""
        if shutil.which("podman") is None:
            return "podman is not installed (./scripts/test installs podman, runc, debootstrap)"
        p = cls()
        if p("image", "exists", BASE_IMAGE, check=False).returncode != 0:
            made = subprocess.run(
                [str(ROOT / "scripts" / "docker-base")], capture_output=True, text=True,
                timeout=900,
            )  # fmt: skip
            if made.returncode != 0:
                last = (made.stderr.strip().splitlines() or ["?"])[-1]
                return f"the base image {BASE_IMAGE} cannot be made (scripts/docker-base): {last}"
        r = p("run", "--rm", *ulimits(), "--network=none", BASE_IMAGE, "true", check=False)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            return f"podman cannot run a container here: {last}"
        return None

    def build(self, target: str, tag: str) -> float:
        """Build docker/Dockerfile's ``target`` as ``tag``; the seconds it took."""
        start = time.monotonic()
        self(
            "build", "--network=host", "--format", "docker", *ulimits(),
            "--ignorefile", str(ROOT / "docker" / "Dockerfile.dockerignore"),
            "-f", str(ROOT / "docker" / "Dockerfile"), "--target", target, "-t", tag, str(ROOT),
            timeout=1500,
        )  # fmt: skip
        return time.monotonic() - start

    def size_mb(self, image: str) -> float:
        return int(self("image", "inspect", "--format", "{{.Size}}", image).stdout) / 1e6

    def volume(self, prefix: str = "tidelog-test") -> str:
        name = unique(prefix)
        self("volume", "create", name)
        self.made.append(("volume", name))
        return name

    def inspect(self, name: str) -> dict[str, object]:
        data = json.loads(self("inspect", name).stdout)
        assert isinstance(data, list) and data, name
        first = data[0]
        assert isinstance(first, dict)
        return first

    def logs(self, name: str) -> str:
        r = self("logs", name, check=False)
        return r.stdout + r.stderr

    def cleanup(self) -> None:
        for kind, name in reversed(self.made):
            if kind == "container":
                self("rm", "-f", "-t", "0", name, check=False)
            else:
                self(kind, "rm", "-f", name, check=False)
        self.made.clear()


@dataclass
class Container:
    """A broker container: ``port`` on the host's 127.0.0.1 reaches its listener."""

    podman: Podman
    name: str
    port: int
    mode: str  # "publish" (-p 127.0.0.1:PORT:9092) or "host" (--network=host)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_healthy(self, timeout: float = 90) -> None:
        """Run the image's HEALTHCHECK until it passes (podman has no systemd timer here)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.podman("inspect", "--format", "{{.State.Status}}", self.name).stdout
            if state.strip() != "running":
                logs = self.podman.logs(self.name)
                raise AssertionError(f"{self.name} is {state.strip()}:\n{logs}")
            if self.podman("healthcheck", "run", self.name, check=False).returncode == 0:
                return
            time.sleep(0.5)
        raise AssertionError(f"{self.name} never became healthy:\n{self.podman.logs(self.name)}")


def run_broker(
    podman: Podman, image: str, volume: str, *, env: dict[str, str] | None = None,
    args: Sequence[str] = (), mode: str = "publish", port: int | None = None,
) -> Container:  # fmt: skip
    """Start a broker container on ``volume``, published on 127.0.0.1 (``mode`` says how)."""
    port = port or free_port()
    name = unique("tidelog-test")
    flags = ["-d", "--name", name, *ulimits(), "-v", f"{volume}:/var/lib/tidelog"]
    settings = {
        "TIDELOG_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "TIDELOG_OFFSETS_TOPIC_NUM_PARTITIONS": "1",  # quicker start
        "TIDELOG_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "1",
        **(env or {}),
    }
    if mode == "publish":
        flags += ["-p", f"127.0.0.1:{port}:9092"]
    else:  # the host's network: the listener itself binds 127.0.0.1
        flags += ["--network=host"]
        settings["TIDELOG_LISTENERS"] = f"PLAINTEXT://127.0.0.1:{port}"
        settings["TIDELOG_METRICS_PORT"] = str(free_port())
    for key, value in settings.items():
        flags += ["-e", f"{key}={value}"]
    podman.made.append(("container", name))
    podman("run", *flags, image, *args)
    c = Container(podman, name, port, mode)
    c.wait_healthy()
    return c


def port_mode(podman: Podman, image: str) -> str:
    """``publish`` when a real ``-p`` port mapping works here, else ``host`` (--network=host)."""
    port = free_port()
    r = podman(
        "run", "--rm", *ulimits(), "-p", f"127.0.0.1:{port}:9092", "--entrypoint", "true", image,
        check=False,
    )  # fmt: skip
    return "publish" if r.returncode == 0 else "host"
