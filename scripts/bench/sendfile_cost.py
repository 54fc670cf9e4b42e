"""What a fetch answer of N bytes of record data costs the server: read-and-write vs sendfile.

    .venv/bin/python scripts/bench/sendfile_cost.py [--sizes 4096,16384,...] [--count 2000]

A server process (uvloop, a Protocol as the broker's connection) answers each 4-byte request
"N" with an 8-byte head and N bytes of a file in the page cache, one answer in flight:

- ``read``: ``os.pread`` (in a worker thread from ``BLOCKING_READ_BYTES`` on, as the fetch path
  did) and ``transport.writelines``;
- ``sendfile``: the broker's own ``FileSender`` (``tidelog.broker.sendfile``), steps on the loop;
- ``sendfile-thread``: the same with every step in a worker thread.

The client reads every answer whole. Printed per size and mode: the server's CPU (utime +
stime from /proc) per answer and the wall time per answer, min over ``--runs`` alternating
runs. This is where ``SENDFILE_MIN_BYTES`` comes from.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODES = ("read", "sendfile", "sendfile-thread")
_REQ = struct.Struct(">i")


def serve(mode: str, path: str, port_file: str) -> None:
    import uvloop

    from tidelog.broker.sendfile import BLOCKING_READ_BYTES, FileAnswer, FileSender, SendSocket
    from tidelog.storage.info import FileRegion

    fd = os.open(path, os.O_RDONLY)

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def run_blocking(fn: object) -> object:
            return await loop.run_in_executor(None, fn)  # type: ignore[arg-type]

        class Conn(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.t: asyncio.Transport = transport  # type: ignore[assignment]
                sock = transport.get_extra_info("socket")
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.buf = b""
                self.send_socket = (
                    SendSocket(sock.fileno()) if mode.startswith("sendfile") else None
                )

            def data_received(self, data: bytes) -> None:
                self.buf += data
                while len(self.buf) >= 4:
                    (n,) = _REQ.unpack_from(self.buf)
                    self.buf = self.buf[4:]
                    head = struct.pack(">iI", n + 4, 0)
                    if mode.startswith("sendfile"):
                        answer = FileAnswer(head, (FileRegion(path, 0, n),), b"")
                        assert self.send_socket is not None
                        sender = FileSender(
                            loop,
                            self.send_socket,
                            answer,
                            run_blocking,  # type: ignore[arg-type]
                            in_thread=mode == "sendfile-thread",
                        )
                        sender.start()
                    elif n >= BLOCKING_READ_BYTES:
                        fut = loop.run_in_executor(None, os.pread, fd, n, 0)
                        fut.add_done_callback(lambda f, h=head: self.t.writelines([h, f.result()]))
                    else:
                        self.t.writelines([head, os.pread(fd, n, 0)])

        server = await loop.create_server(Conn, "127.0.0.1", 0)
        Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
        await asyncio.sleep(3600)

    uvloop.run(main())


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(mode: str, path: Path, size: int, count: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", mode, str(path), str(port_file)], env=env
        )
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() or not port_file.read_text():
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start")
                time.sleep(0.02)
            port = int(port_file.read_text())
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = bytearray(size + 8)
            view = memoryview(buf)

            def one() -> None:
                s.sendall(_REQ.pack(size))
                got = 0
                while got < size + 8:
                    n = s.recv_into(view[got:])
                    if n == 0:
                        raise ConnectionError("server closed")
                    got += n

            for _ in range(min(200, count)):
                one()
            cpu0, t0 = _cpu(proc.pid), time.perf_counter()
            for _ in range(count):
                one()
            cpu, wall = _cpu(proc.pid) - cpu0, time.perf_counter() - t0
            s.close()
            return cpu / count * 1e6, wall / count * 1e6
        finally:
            proc.kill()
            proc.wait()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="4096,16384,32768,65536,262144,1048576")
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.NamedTemporaryFile(prefix="sendfile-cost-", dir="/tmp") as f:
        f.write(os.urandom(max(sizes)))
        f.flush()
        path = Path(f.name)
        print(f"load average {os.getloadavg()[0]:.2f}; server CPU / wall per answer, min of runs")
        print(f"{'bytes':>9}  " + "  ".join(f"{m + ' cpu / wall us':>28}" for m in MODES))
        for size in sizes:
            count = max(300, min(args.count, args.count * 16384 // size))
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.runs):
                for mode in MODES:
                    cpu, wall = measure(mode, path, size, count)
                    old = best.get(mode)
                    best[mode] = (min(cpu, old[0]), min(wall, old[1])) if old else (cpu, wall)
            cells = "  ".join(f"{best[m][0]:>16.1f} / {best[m][1]:>9.1f}" for m in MODES)
            print(f"{size:>9}  {cells}", flush=True)


if __name__ == "__main__":
    main()
