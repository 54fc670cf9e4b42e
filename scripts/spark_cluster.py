#!/usr/bin/env python3
"""A Spark standalone cluster from pyspark's own jars: one master and N workers on this host.

    python scripts/spark_cluster.py --workers 2 --cores 1 --memory 1g
    # prints the master URL (spark://127.0.0.1:PORT), runs until Ctrl-C, then stops everything

pyspark's wheel has no start-master.sh; this runs `spark-class ...deploy.master.Master` and
`...deploy.worker.Worker spark://HOST:PORT` itself, waits until every worker has registered, and
stops them (SIGTERM, then SIGKILL) on exit. Tests and benchmarks use `StandaloneCluster`.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START_TIMEOUT_S = 240.0  # JVMs start slowly on a loaded 2-core machine


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """Master + workers as child processes; `url` is what `--master` takes."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 host: str = "127.0.0.1", work_dir: Path | None = None) -> None:  # fmt: skip
        self.host = host
        self.port = _free_port(host)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.dir = work_dir or Path(tempfile.mkdtemp(prefix="tidelog-spark-cluster-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    @property
    def url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("SPARK_HOME", str(spark_home()))
        env["SPARK_LOCAL_IP"] = self.host
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["SPARK_LOG_DIR"] = str(self.dir)
        return env

    def _spawn(self, name: str, args: list[str]) -> Path:
        log = self.dir / f"{name}.log"
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True
            )
        self.procs.append(proc)
        self.logs.append(log)
        return log

    def _wait(self, log: Path, text: str, count: int = 1) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if log.exists() and log.read_text(errors="replace").count(text) >= count:
                return
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Spark process exited early:\n{self.log_text()[-4000:]}")
            time.sleep(0.5)
        raise RuntimeError(
            f"Spark cluster: no {text!r} in {log} in time:\n{self.log_text()[-4000:]}"
        )

    def start(self) -> StandaloneCluster:
        self.dir.mkdir(parents=True, exist_ok=True)
        master = self._spawn("master", [
            "org.apache.spark.deploy.master.Master", "--host", self.host,
            "--port", str(self.port), "--webui-port", str(_free_port(self.host)),
        ])  # fmt: skip
        self._wait(master, "Starting Spark master at")
        for i in range(self.workers):
            wdir = self.dir / f"worker{i}"
            wdir.mkdir(exist_ok=True)
            self._spawn(f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", self.url, "--host", self.host,
                "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(_free_port(self.host)), "--work-dir", str(wdir),
            ])  # fmt: skip
        for i in range(self.workers):
            self._wait(self.dir / f"worker{i}.log", "Successfully registered with master")
        return self

    def log_text(self) -> str:
        return "".join(f"== {p.name}\n{p.read_text(errors='replace')}" for p in self.logs
                       if p.exists())  # fmt: skip

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1, help="cores per worker")
    p.add_argument("--memory", default="1g", help="memory per worker (Spark's 512m, 1g, ...)")
    p.add_argument("--host", default="127.0.0.1")
    args = p.parse_args(argv)
    cluster = StandaloneCluster(args.workers, args.cores, args.memory, args.host)
    t0 = time.monotonic()
    with cluster:
        print(f"{cluster.url}  ({args.workers} workers x {args.cores} core(s), {args.memory}; "
              f"up in {time.monotonic() - t0:.0f} s; logs in {cluster.dir}); Ctrl-C stops it",
              flush=True)  # fmt: skip
        try:
            while all(p.poll() is None for p in cluster.procs):
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
