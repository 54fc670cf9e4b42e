"""Start-up figures: how soon a broker answers ApiVersions, and how small it is when idle.

    .venv/bin/python scripts/bench/startup.py [--runs 10] [--json]

- ``serve``: time from just before the ``tidelog serve`` process is spawned (the console
  script; ``./scripts/serve`` and its venv check excluded) until it is ready: it answered
  ApiVersions and then, each sent once the one before is answered, Metadata, InitProducerId
  (idempotent) and a Produce of one record (to a topic that does not exist: the handler runs,
  no disk work), as a producer starts. A broker that answered ApiVersions while the rest of it
  still loaded would show it here. A fresh empty log dir each run; the client polls connect
  every millisecond. ``api_versions_ms``: the ApiVersions answer alone.
- ``embedded``: in a fresh Python process, ``import tidelog`` (timed apart as ``import_ms``),
  then ``tidelog.Broker().start()`` until it is ready as above (``start_ms``).
- ``idle_rss_mb``: the ``tidelog serve`` process's VmRSS one second after its first answer.
- The floors (issue 41), measured in the same run, each run right before its tidelog run:
  ``serve_floor``: the same spawn -> the same four answers for a minimal server in the same venv
  that imports asyncio, ssl and uvloop and answers any frame with its correlation id;
  ``embedded_floor``: in a fresh process, import asyncio, ssl and uvloop, start a uvloop loop in
  a thread that binds and serves such a server, and get the four answers. The goals are ratios:
  ``tidelog serve`` <= 1.5x its floor; the embedded broker (``import tidelog`` -> ``Broker()``
  started and answering, ``embedded_ready_ms``) <= 2x its floor.

One warm-up run of each comes first and is not counted; the children run with byte-code caching
on (``PYTHONDONTWRITEBYTECODE`` removed), as an installed package has its ``.pyc`` files.

Medians of ``--runs`` runs. KIP-974 (Kafka's GraalVM native image) gives 110-140 ms and
230-540 MB; the JVM broker about 1.2 s and 1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: Targets of issue 21 and the figures of KIP-974 they are set against.
TARGET_SERVE_MS = 150.0
TARGET_EMBEDDED_MS = 50.0
TARGET_RSS_MB = 40.0
#: Goals of issue 41: each start against its floor measured in the same run.
GOAL_SERVE_RATIO = 1.5
GOAL_EMBEDDED_RATIO = 2.0

#: The floors' server: answers every frame with its correlation id (all a probe reads).
_ANSWER = r"""
class Answer(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.data = transport, b""
    def data_received(self, data):
        self.data += data
        while len(self.data) >= 4 and len(self.data) >= 4 + struct.unpack(">i", self.data[:4])[0]:
            n = struct.unpack(">i", self.data[:4])[0]
            frame, self.data = self.data[4:4 + n], self.data[4 + n:]
            self.transport.write(struct.pack(">i", 6) + frame[4:8] + b"\0\0")
"""

#: The floor of ``tidelog serve``: what any asyncio+ssl+uvloop server in this venv costs to
#: start and answer one frame (argv[1]: the port).
_SERVE_FLOOR = (
    r"""
import asyncio, ssl, struct, sys
import uvloop

"""
    + _ANSWER
    + r"""

async def main():
    server = await asyncio.get_running_loop().create_server(Answer, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()

uvloop.run(main())
"""
)

#: The floor of the embedded broker: a fresh process imports what an in-process uvloop server
#: needs, binds it on a loop in a thread, and gets one answer (``ready_ms``).
_EMBEDDED_FLOOR = (
    r"""
import json, sys, time
t0 = time.perf_counter()
import asyncio, ssl, struct, threading
import uvloop

"""
    + _ANSWER
    + r"""

ready, port = threading.Event(), []

def run():
    loop = uvloop.new_event_loop()
    server = loop.run_until_complete(loop.create_server(Answer, "127.0.0.1", 0))
    port.append(server.sockets[0].getsockname()[1])
    ready.set()
    loop.run_forever()

threading.Thread(target=run, daemon=True).start()
ready.wait()
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from startup import first_answers
t_api, t2 = first_answers(port[0], time.perf_counter() + 30)
assert t2 > 0
print(json.dumps({"import_ms": (t1 - t0) * 1000, "ready_ms": (t2 - t0) * 1000,
                  "api_versions_ms": (t_api - t0) * 1000, "cpu_ms": time.process_time() * 1000}))
"""
)
KIP_974 = {
    "native image (KIP-974)": "start 110-140 ms, 230-540 MB",
    "JVM broker (KIP-974)": "start ~1.2 s, ~1 GB",
}

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
_REQUEST = struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0

#: After ApiVersions, what a producer sends next, each once the one before is answered: Metadata
#: v1 (every topic), InitProducerId v0 (idempotent, no transactional id) and Produce v3 (acks=1,
#: one record of one byte, to ``startup-probe`` partition 0, a topic that does not exist: the
#: answer is UNKNOWN_TOPIC_OR_PARTITION, which needs the handler loaded but no disk work).
#: Pre-encoded here, so the embedded child imports nothing more to send them.
_PROBE_BATCH = bytes.fromhex(
    "000000000000000000000039ffffffff026a9a62380000000000000000000000000000000000000000"
    "0000ffffffffffffffffffffffffffff000000010e00000001027800"
)
_PRODUCE_V3 = (
    struct.pack(">hhih", 0, 3, 4, 5)
    + b"probe"
    + struct.pack(">hhii", -1, 1, 30000, 1)
    + struct.pack(">h", 13)
    + b"startup-probe"
    + struct.pack(">iii", 1, 0, len(_PROBE_BATCH))
    + _PROBE_BATCH
)
_FOLLOW_UPS = tuple(
    struct.pack(">i", len(body)) + body
    for body in (
        struct.pack(">hhih", 3, 1, 2, 5) + b"probe" + struct.pack(">i", -1),
        struct.pack(">hhih", 22, 0, 3, 5) + b"probe" + struct.pack(">hi", -1, 60000),
        _PRODUCE_V3,
    )
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answered(sock: socket.socket, request: bytes, correlation_id: int) -> bool:
    sock.sendall(request)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return len(data) >= 8 and struct.unpack(">i", data[4:8])[0] == correlation_id


def api_versions_answered(port: int, deadline: float) -> bool:
    """Connect (retrying every ms until ``deadline``), send ApiVersions v0, read the answer."""
    return first_answers(port, deadline, follow_ups=False)[0] > 0


def first_answers(port: int, deadline: float, *, follow_ups: bool = True) -> tuple[float, float]:
    """Connect (retrying every ms until ``deadline``), send ApiVersions v0 and, once it is
    answered, Metadata, InitProducerId and Produce (``_FOLLOW_UPS``) one after the other.
    Returns the ``perf_counter`` times of the ApiVersions answer and of the last answer (0.0:
    not answered): a broker is ready when it answers all four, not ApiVersions alone."""
    while time.perf_counter() < deadline:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.001)
            continue
        with sock:
            if not _answered(sock, _REQUEST, 1):
                return 0.0, 0.0
            api_versions = time.perf_counter()
            if not follow_ups:
                return api_versions, api_versions
            for correlation_id, request in enumerate(_FOLLOW_UPS, 2):
                if not _answered(sock, request, correlation_id):
                    return api_versions, 0.0
            return api_versions, time.perf_counter()
    return 0.0, 0.0


def _rss_kb(pid: int, key: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _cpu_ms(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (less sensitive to a busy machine than wall
    time: the other work on the cores delays the broker but does not add to its CPU time)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def tidelog_command(python: str) -> list[str]:
    script = Path(python).parent / "tidelog"
    if script.exists() and TREE is None:
        return [str(script), "serve"]
    # A tree from before issue 40 has no ``tidelog/__main__.py``: its command was a broker module.
    if TREE is not None and not (TREE / "tidelog" / "__main__.py").exists():
        return [python, "-m", "tidelog.broker.cli", "serve"]
    return [python, "-m", "tidelog", "serve"]


#: ``--tree``: run tidelog from this checkout instead of the installed one (A/B comparisons).
TREE: Path | None = None


def _env() -> dict[str, str]:
    """The caller's environment, but with byte-code caching on: an installed package has its
    ``.pyc`` files (pip writes them), and a warm-up run writes them for a source checkout."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if TREE is not None:
        env["PYTHONPATH"] = str(TREE)
    return env


def serve_once(
    python: str, workdir: Path, idle_s: float, *, floor: bool = False
) -> dict[str, float]:
    """One ``tidelog serve`` start (``floor``: the minimal server's instead)."""
    port = free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="startup-", dir=workdir))
    cmd = (
        [python, "-c", _SERVE_FLOOR, str(port)]
        if floor
        else [
            *tidelog_command(python),
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={log_dir}",
        ]
    )
    log_path = log_dir.parent / f"{log_dir.name}.log"
    with open(log_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_env(),
            cwd=workdir,  # not the caller's: ``-m`` would import a ./tidelog from there first
        )
        try:
            t_api, t_ready = first_answers(port, t0 + 30)
            cpu_ms = _cpu_ms(proc.pid)
            if t_ready <= 0:
                raise RuntimeError(f"not ready within 30 s (see {log_path})")
            ready_ms = (t_ready - t0) * 1000
            api_versions_ms = (t_api - t0) * 1000
            time.sleep(idle_s)
            rss = _rss_kb(proc.pid) / 1024
            hwm = _rss_kb(proc.pid, "VmHWM") / 1024
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    shutil.rmtree(log_dir, ignore_errors=True)
    return {
        "ready_ms": ready_ms,
        "api_versions_ms": api_versions_ms,
        "cpu_ms": cpu_ms,
        "idle_rss_mb": rss,
        "peak_rss_mb": hwm,
    }


#: ``import tidelog`` -> ``tidelog.Broker().start()`` returned (the broker started, its
#: services included) -> the first ApiVersions answer: ``ready_ms``; ``import_ms`` is the part
#: before ``Broker()``, ``start_ms`` the rest.
_EMBEDDED_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import tidelog
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from startup import first_answers
t1b = time.perf_counter()
b = tidelog.Broker()
b.start()
t_api, t3 = first_answers(b.port, time.perf_counter() + 30)
assert t3 > 0
cpu_ms = time.process_time() * 1000
b.close()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "start_ms": (t3 - t1b) * 1000,
                  "ready_ms": (t3 - t1b + t1 - t0) * 1000,
                  "api_versions_ms": (t_api - t1b + t1 - t0) * 1000, "cpu_ms": cpu_ms}))
"""


def embedded_once(python: str, *, floor: bool = False) -> dict[str, float]:
    proc = subprocess.run(
        [python, "-c", _EMBEDDED_FLOOR if floor else _EMBEDDED_CHILD, str(HERE)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tempfile.gettempdir(),
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"embedded run failed:\n{proc.stderr[-3000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def measure(
    python: str = sys.executable, runs: int = 10, idle_s: float = 1.0, embedded: bool = True
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tidelog-startup-"))
    serve: list[dict[str, float]] = []
    serve_floor: list[dict[str, float]] = []
    inproc: list[dict[str, float]] = []
    inproc_floor: list[dict[str, float]] = []
    try:
        serve_once(python, workdir, 0.0)  # warm-up: byte-code caches, page cache
        serve_once(python, workdir, 0.0, floor=True)
        if embedded:
            embedded_once(python)
            embedded_once(python, floor=True)
        for _ in range(runs):  # each floor right before its tidelog run: the same load
            serve_floor.append(serve_once(python, workdir, 0.0, floor=True))
            serve.append(serve_once(python, workdir, idle_s))
            if embedded:
                inproc_floor.append(embedded_once(python, floor=True))
                inproc.append(embedded_once(python))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def med(rows: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(r[key] for r in rows), 1)

    figures = {
        "serve_ready_ms": med(serve, "ready_ms"),
        "serve_ready_ms_min": round(min(r["ready_ms"] for r in serve), 1),
        "serve_ready_ms_max": round(max(r["ready_ms"] for r in serve), 1),
        "serve_cpu_ms": med(serve, "cpu_ms"),
        "serve_api_versions_ms": med(serve, "api_versions_ms"),
        "idle_rss_mb": med(serve, "idle_rss_mb"),
        "peak_rss_mb": med(serve, "peak_rss_mb"),
    }
    figures["serve_floor_ms"] = med(serve_floor, "ready_ms")
    figures["serve_floor_cpu_ms"] = med(serve_floor, "cpu_ms")
    figures["serve_ratio"] = round(figures["serve_ready_ms"] / figures["serve_floor_ms"], 2)
    if inproc:
        figures["embedded_start_ms"] = med(inproc, "start_ms")
        figures["embedded_import_ms"] = med(inproc, "import_ms")
        figures["embedded_ready_ms"] = med(inproc, "ready_ms")
        figures["embedded_api_versions_ms"] = med(inproc, "api_versions_ms")
        figures["embedded_floor_ms"] = med(inproc_floor, "ready_ms")
        figures["embedded_ratio"] = round(
            figures["embedded_ready_ms"] / figures["embedded_floor_ms"], 2
        )
        # CPU of the whole child process to its answer (interpreter start included): on a
        # loaded machine the steadier figure, wall time being mostly waiting for a core.
        figures["embedded_cpu_ms"] = med(inproc, "cpu_ms")
        figures["embedded_floor_cpu_ms"] = med(inproc_floor, "cpu_ms")
    targets = {
        "serve_ready_ms": {
            "target": TARGET_SERVE_MS,
            "met": figures["serve_ready_ms"] <= TARGET_SERVE_MS,
        },
        "idle_rss_mb": {"target": TARGET_RSS_MB, "met": figures["idle_rss_mb"] <= TARGET_RSS_MB},
    }
    targets["serve_ratio"] = {
        "target": GOAL_SERVE_RATIO,
        "met": figures["serve_ratio"] <= GOAL_SERVE_RATIO,
    }
    if inproc:
        targets["embedded_start_ms"] = {
            "target": TARGET_EMBEDDED_MS,
            "met": figures["embedded_start_ms"] <= TARGET_EMBEDDED_MS,
        }
        targets["embedded_ratio"] = {
            "target": GOAL_EMBEDDED_RATIO,
            "met": figures["embedded_ratio"] <= GOAL_EMBEDDED_RATIO,
        }
    return {
        "runs": runs,
        "median": figures,
        "serve_runs": serve,
        "serve_floor_runs": serve_floor,
        "embedded_runs": inproc,
        "embedded_floor_runs": inproc_floor,
        "targets": targets,
        "loadavg_1m": os.getloadavg()[0],
    }


def render(result: dict[str, Any]) -> str:
    m = result["median"]
    t = result["targets"]

    def verdict(key: str) -> str:
        return "met    " if t[key]["met"] else "NOT met"

    serve = (
        f"(min {m['serve_ready_ms_min']:.1f}, max {m['serve_ready_ms_max']:.1f}; "
        f"CPU {m['serve_cpu_ms']:.0f} ms)"
    )
    rows = [
        ("tidelog serve -> ApiVersions answer", m["serve_ready_ms"], "ms", "serve_ready_ms", serve),
    ]
    if "embedded_start_ms" in m:
        rows.append(
            (
                "tidelog.Broker().start() (embedded)",
                m["embedded_start_ms"],
                "ms",
                "embedded_start_ms",
                f"(import tidelog before it: {m['embedded_import_ms']:.0f} ms)",
            )
        )
    rows += [
        (
            "tidelog serve resident set, idle",
            m["idle_rss_mb"],
            "MB",
            "idle_rss_mb",
            f"(peak {m['peak_rss_mb']:.1f} MB)",
        ),
    ]
    lines = [f"start-up, median of {result['runs']} runs"]
    for label, value, unit, key, note in rows:
        target = f"<= {t[key]['target']:.0f} {unit}"
        lines.append(f"  {label:37} {value:7.1f} {unit}  {target:>9}  {verdict(key)}  {note}")
    lines.append("goals of issue 41, each start against its floor in this run:")
    lines.append(
        f"  {verdict('serve_ratio')}  tidelog serve / floor = {m['serve_ready_ms']:.1f} / "
        f"{m['serve_floor_ms']:.1f} ms = {m['serve_ratio']:.2f}x  (goal <= "
        f"{GOAL_SERVE_RATIO}x; floor: asyncio+ssl+uvloop server spawned -> first answer, "
        f"CPU {m['serve_floor_cpu_ms']:.0f} ms)"
    )
    lines.append(
        f"           CPU to the answers: {m['serve_cpu_ms']:.0f} / "
        f"{m['serve_floor_cpu_ms']:.0f} ms = "
        f"{m['serve_cpu_ms'] / max(m['serve_floor_cpu_ms'], 1):.2f}x (10 ms ticks); "
        f"ApiVersions alone answered at {m['serve_api_versions_ms']:.1f} ms"
    )
    if "embedded_ratio" in m:
        lines.append(
            f"  {verdict('embedded_ratio')}  embedded / floor = {m['embedded_ready_ms']:.1f} / "
            f"{m['embedded_floor_ms']:.1f} ms = {m['embedded_ratio']:.2f}x  (goal <= "
            f"{GOAL_EMBEDDED_RATIO}x; import tidelog -> Broker() started and answering, "
            "against an in-process uvloop server's import + bind + first answer)"
        )
        lines.append(
            f"           CPU to the answer: {m['embedded_cpu_ms']:.0f} / "
            f"{m['embedded_floor_cpu_ms']:.0f} ms = "
            f"{m['embedded_cpu_ms'] / max(m['embedded_floor_cpu_ms'], 1):.2f}x; "
            f"ApiVersions alone answered at {m['embedded_api_versions_ms']:.1f} ms"
        )
    lines += [f"  {name:37} {figures}" for name, figures in KIP_974.items()]
    lines.append(f"  1-minute load average after the runs: {result['loadavg_1m']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--python", default=sys.executable, help="the venv's python (default: this one)")
    p.add_argument("--json", action="store_true", help="print the JSON too")
    p.add_argument("--serve-only", action="store_true", help="skip the embedded broker")
    p.add_argument(
        "--tree", type=Path, default=None, help="run tidelog from this checkout (PYTHONPATH)"
    )
    args = p.parse_args(argv)
    global TREE
    TREE = args.tree.resolve() if args.tree else None
    result = measure(args.python, args.runs, embedded=not args.serve_only)
    print(render(result))
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
