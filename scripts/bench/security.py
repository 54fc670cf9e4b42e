"""Security figures: produce/consume over TLS next to plaintext, SCRAM connection set-up, and
the cost of an authorization check with 10,000 ACLs.

    .venv/bin/python scripts/bench/security.py --messages 1000000 --size 100 --runs 3

1. One broker listens on PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-256/512; the
   credential is made offline with ``tidelog storage format --add-scram``). ``kcat -P -l`` sends
   ``--messages`` records of ``--size`` bytes over PLAINTEXT, then over SSL; ``kcat -C -e`` reads
   them back. Wall rates and the broker's CPU seconds (user+system from /proc) are printed.
2. SCRAM set-up: ``--connections`` sequential connections, each TCP (+ TLS) connect,
   SaslHandshake, the two SaslAuthenticate round trips of SCRAM and one ApiVersions, from a raw
   client (its PBKDF2 is computed once, so the figure is the connection's own cost); next to a
   plain connect + ApiVersions.
3. Authorization: ``Authorizer.authorize`` in process with ``--acls`` ACLs (half LITERAL, half
   PREFIXED, one principal each), hits and misses; then the broker restarted with the
   StandardAuthorizer and those ACLs (ANONYMOUS allowed on the bench topic) and the PLAINTEXT
   produce/consume measured again.

Needs kcat and the ``cryptography`` package (the dev extra) for the test certificates. The
machine is shared: compare broker CPU seconds more than wall rates.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "security")]

from certs import make_certs, ssl_settings  # noqa: E402

PY = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Broker:
    def __init__(self, work: Path, settings: dict[str, str]) -> None:
        self.work = work
        self.settings = settings
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, extra: dict[str, str] | None = None) -> None:
        args = [PY, "-m", "tidelog", "serve"]
        for key, value in {**self.settings, **(extra or {})}.items():
            args += ["--override", f"{key}={value}"]
        log = self.work / "broker.log"
        self.proc = subprocess.Popen(args, stdout=log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while "tidelog listening" not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("broker did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.1)
        log.write_text("")

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(60)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


def kcat(args: list[str], stdin: Path | None = None) -> None:
    with stdin.open("rb") if stdin else open(os.devnull, "rb") as f:
        subprocess.run(["kcat", *args], stdin=f, stdout=subprocess.DEVNULL, check=True, timeout=600)


def data_path(work: Path, messages: int, size: int) -> Path:
    path = work / f"data-{messages}-{size}.txt"
    if not path.exists():
        line = (b"x" * (size - 1)) + b"\n"
        with path.open("wb") as f:
            for _ in range(messages // 10000):
                f.write(line * 10000)
            f.write(line * (messages % 10000))
    return path


def produce_consume(
    broker: Broker, port: int, protocol_args: list[str], topic: str, data: Path, n: int
) -> dict[str, float]:
    common = ["-b", f"127.0.0.1:{port}", *protocol_args]
    cpu0, t0 = cpu_s(broker.pid), time.perf_counter()
    kcat(["-P", *common, "-t", topic, "-l", "-X", "linger.ms=5", "-X", "batch.size=1000000"], data)
    produce_s, produce_cpu = time.perf_counter() - t0, cpu_s(broker.pid) - cpu0
    cpu0, t0 = cpu_s(broker.pid), time.perf_counter()
    kcat(["-C", *common, "-t", topic, "-o", "beginning", "-e", "-c", str(n), "-q"])
    consume_s, consume_cpu = time.perf_counter() - t0, cpu_s(broker.pid) - cpu0
    return {
        "produce_msgs_s": n / produce_s,
        "produce_broker_cpu_s": produce_cpu,
        "consume_msgs_s": n / consume_s,
        "consume_broker_cpu_s": consume_cpu,
    }


def frame(api_key: int, version: int, payload: bytes, correlation: int) -> bytes:
    client = b"bench"
    body = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + correlation.to_bytes(4, "big")
    body += len(client).to_bytes(2, "big") + client + payload
    return len(body).to_bytes(4, "big") + body


def recv_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    size = int.from_bytes(head, "big")
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


_SALTED: dict[tuple[bytes, int], bytes] = {}


def scram_connect(port: int, context: ssl.SSLContext | None, user: str, password: str) -> None:
    sock: socket.socket = socket.create_connection(("127.0.0.1", port))
    if context is not None:
        sock = context.wrap_socket(sock, server_hostname="localhost")
    try:
        mech = b"SCRAM-SHA-256"
        sock.sendall(frame(17, 1, len(mech).to_bytes(2, "big") + mech, 1))
        assert recv_frame(sock)[4:6] == b"\0\0"
        bare = f"n={user},r={base64.b64encode(os.urandom(18)).decode()}"
        first = ("n,," + bare).encode()
        sock.sendall(frame(36, 1, len(first).to_bytes(4, "big") + first, 2))
        answer = recv_frame(sock)
        assert answer[4:6] == b"\0\0", answer
        pos = 6
        msg_len = int.from_bytes(answer[pos : pos + 2], "big", signed=True)
        pos += 2 + max(msg_len, 0)
        n = int.from_bytes(answer[pos : pos + 4], "big")
        server_first = answer[pos + 4 : pos + 4 + n].decode()
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = _SALTED.get((salt, iterations))
        if salted is None:
            salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
            _SALTED[(salt, iterations)] = salted
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        stored = hashlib.sha256(client_key).digest()
        without = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{server_first},{without}".encode()
        sig = hmac.new(stored, auth, "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
        final = f"{without},p={proof.decode()}".encode()
        sock.sendall(frame(36, 1, len(final).to_bytes(4, "big") + final, 3))
        assert recv_frame(sock)[4:6] == b"\0\0"
        sock.sendall(frame(18, 0, b"", 4))
        recv_frame(sock)
    finally:
        sock.close()


def plain_connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(frame(18, 0, b"", 1))
        recv_frame(sock)


def timed(fn: Any, count: int) -> dict[str, float]:
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "mean_ms": statistics.fmean(times),
        "p50_ms": times[len(times) // 2],
        "p99_ms": times[int(len(times) * 0.99) - 1],
    }


def acl_bindings(count: int) -> list[Any]:
    from tidelog.broker.security.acls import (
        AclBinding,
        Operation,
        PatternType,
        Permission,
        ResourceType,
    )

    out = []
    for i in range(count):
        pattern = PatternType.PREFIXED if i % 2 else PatternType.LITERAL
        out.append(
            AclBinding(
                ResourceType.TOPIC,
                pattern,
                f"team{i:05d}-",
                f"User:u{i}",
                "*",
                Operation.READ,
                Permission.ALLOW,
            )
        )
    return out


def authorizer_micro(count: int) -> dict[str, float]:
    from tidelog.broker.security.acls import Operation, ResourceType
    from tidelog.broker.security.authorizer import Authorizer

    authz = Authorizer(None)
    authz.create(acl_bindings(count))
    checks = 200_000
    out = {}
    for label, principal, name in (
        ("hit_prefixed", "User:u1", "team00001-orders"),
        ("hit_literal", "User:u2", "team00002-"),
        ("miss", "User:nobody", "team00001-orders"),
    ):
        t0 = time.perf_counter()
        for _ in range(checks):
            authz.authorize(principal, "127.0.0.1", Operation.READ, ResourceType.TOPIC, name)
        out[f"{label}_us"] = (time.perf_counter() - t0) / checks * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tidelog-bench-security-"))
    certs = make_certs(work / "certs")
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    log_dir = work / "data"
    settings = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "log.dirs": str(log_dir),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        **ssl_settings(certs),
    }
    subprocess.run(
        [
            PY,
            "-m",
            "tidelog",
            "storage",
            "format",
            "--override",
            f"log.dirs={log_dir}",
            "--add-scram",
            "SCRAM-SHA-256=[name=bench,password=bench-secret]",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    broker = Broker(work, settings)
    broker.start()
    data = data_path(work, args.messages, args.size)
    tls_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs.ca}"]
    results: dict[str, Any] = {"messages": args.messages, "size": args.size}
    try:
        for run in range(args.runs):
            for label, port, extra in (
                ("plaintext", ports["PLAINTEXT"], []),
                ("tls", ports["SSL"], tls_args),
            ):
                figures = produce_consume(
                    broker, port, extra, f"{label}-{run}", data, args.messages
                )
                results.setdefault(label, []).append(figures)
                print(label, run, {k: round(v, 2) for k, v in figures.items()}, flush=True)
        context = ssl.create_default_context(cafile=str(certs.ca))
        results["connect_plaintext"] = timed(
            lambda: plain_connect(ports["PLAINTEXT"]), args.connections
        )
        results["connect_scram_sasl_plaintext"] = timed(
            lambda: scram_connect(ports["SASL_PLAINTEXT"], None, "bench", "bench-secret"),
            args.connections,
        )
        results["connect_scram_sasl_ssl"] = timed(
            lambda: scram_connect(ports["SASL_SSL"], context, "bench", "bench-secret"),
            args.connections,
        )
        for key in ("connect_plaintext", "connect_scram_sasl_plaintext", "connect_scram_sasl_ssl"):
            print(key, {k: round(v, 3) for k, v in results[key].items()}, flush=True)
        broker.stop()
        # Authorization: in process, then end to end with the StandardAuthorizer on.
        results["authorize"] = authorizer_micro(args.acls)
        print("authorize", {k: round(v, 3) for k, v in results["authorize"].items()}, flush=True)
        from tidelog.broker.security.acls import (
            AclBinding,
            Operation,
            PatternType,
            Permission,
            ResourceType,
        )
        from tidelog.broker.security.authorizer import ACL_FILE, Authorizer

        authz = Authorizer(log_dir / ACL_FILE)
        bindings = acl_bindings(args.acls)
        for op in (Operation.WRITE, Operation.READ, Operation.CREATE):
            bindings.append(
                AclBinding(
                    ResourceType.TOPIC,
                    PatternType.PREFIXED,
                    "authz-",
                    "User:ANONYMOUS",
                    "*",
                    op,
                    Permission.ALLOW,
                )
            )
        bindings.append(
            AclBinding(
                ResourceType.GROUP,
                PatternType.LITERAL,
                "*",
                "User:ANONYMOUS",
                "*",
                Operation.READ,
                Permission.ALLOW,
            )
        )
        authz.create(bindings)
        authz.save(*authz.snapshot())
        broker.start(
            {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
        )
        for run in range(args.runs):
            figures = produce_consume(
                broker, ports["PLAINTEXT"], [], f"authz-{run}", data, args.messages
            )
            results.setdefault("plaintext_authorizer", []).append(figures)
            print(
                "plaintext+authorizer",
                run,
                {k: round(v, 2) for k, v in figures.items()},
                flush=True,
            )
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
    for label in ("plaintext", "tls", "plaintext_authorizer"):
        runs = results.get(label, [])
        if runs:
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            results[f"{label}_median"] = med
            print(f"median {label}:", {k: round(v, 2) for k, v in med.items()})
    print(f"load average: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
