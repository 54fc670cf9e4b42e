"""Fetch answers whose record data goes from the segment files to the socket by ``sendfile``.

A ``FileAnswer`` is a framed answer whose records are file regions
(``storage.info.FileRegion``: whole batches of a segment's ``.log``) instead of bytes: ``head``
(size prefix, response header, the body up to the records' length), the regions, ``tail``. The
fetch path builds one when a partition's record data is at least ``SENDFILE_MIN_BYTES``; the
bytes on the wire are the ones the read-into-memory path sends.

The connection sends it in order with its other answers:

- plaintext, nothing else queued in the transport: ``FileSender``, on a duplicate of the
  connection's socket descriptor (the transport keeps its own; uvloop implements no
  ``loop.sendfile`` and refuses ``add_writer`` on a descriptor a transport owns). ``head`` and
  ``tail`` go by ``os.write``, the regions by ``os.sendfile`` from a duplicate of the segment's
  descriptor, all non-blocking; when the socket is full, ``add_writer`` on the duplicate waits
  until it drains. Each step runs on the loop: from the page cache a step costs the loop less
  than the ``pread`` + write it replaces (measured below); a step slower than ``SLOW_STEP_S``
  means the file was read from disk, and the rest of that answer is sent from a worker thread
  (which waits up to ``THREAD_WAIT_S`` for the client to drain the socket, then hands back to
  the loop). The duplicates keep the socket and the segment file open until the sender is
  done, whatever the transport, retention or the descriptor cache close meanwhile.
- TLS, or bytes still queued in the transport: ``read_chunks`` (``pread``, in a worker thread
  when large) and the connection's normal write.

Why 256 KiB, and steps on the loop: ``scripts/bench/sendfile_cost.py`` (RESULTS.md, "sendfile for
large fetch answers") measures the server's CPU per answer. Up to 128 KiB sendfile costs as much as
``pread`` + write or more (the descriptor duplicate, a separate head and the future outweigh one
copy of the data); from 256 KiB it costs about half (48 vs 88 us at 256 KiB, 128 vs 256 us at
1 MiB). Steps in a worker thread cost more than they save (128 vs 88 us at 256 KiB).
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tidelog.storage.info import FileRegion
from tidelog.storage.segment import DELETED_SUFFIX

__all__ = (
    "BLOCKING_READ_BYTES",
    "SENDFILE_MIN_BYTES",
    "FileAnswer",
    "FileSender",
    "SendSocket",
    "read_chunks",
    "sender_for",
    "write_read",
)

#: Fetch answers with at least this much record data (one partition) are sent from the files.
SENDFILE_MIN_BYTES = 256 * 1024
#: Reads (and sendfile steps) of at least this many bytes run in a worker thread.
BLOCKING_READ_BYTES = 256 * 1024
#: How long a worker thread waits for a full socket to drain before handing back to the loop.
THREAD_WAIT_S = 0.05
#: A sendfile step on the loop slower than this (the file was not in the page cache) sends
#: the rest of the answer from a worker thread.
SLOW_STEP_S = 0.002


class FileAnswer:
    """A framed answer: ``head``, then the regions' bytes, then ``tail``."""

    __slots__ = ("head", "regions", "size", "tail")

    def __init__(
        self, head: bytes, regions: tuple[FileRegion, ...], tail: bytes, size: int = -1
    ) -> None:
        self.head = head
        self.regions = regions
        self.tail = tail
        #: Bytes of record data (the regions; ``size`` when the caller knows it).
        self.size = size if size >= 0 else sum(r.length for r in regions)

    def __len__(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def __repr__(self) -> str:
        return f"FileAnswer({len(self)} bytes, {len(self.regions)} regions)"


def read_chunks(answer: FileAnswer) -> list[bytes]:
    """The answer as bytes (``pread`` of the regions): for TLS and as a fallback."""
    chunks = [answer.head, *(r.read_bytes() for r in answer.regions)]
    if answer.tail:
        chunks.append(answer.tail)
    return chunks


def _open_region(region: FileRegion) -> int:
    """A descriptor of the region's file that the caller owns (and closes)."""
    # Pinned: the segment-file cache may close an idle descriptor (and the number be reused by
    # another file) at any moment, so it is held open while it is duplicated.
    with region.pinned_fd() as fd:
        if fd is not None:
            try:
                return os.dup(fd)
            except OSError:
                pass  # closed meanwhile: open by path
    try:
        return os.open(region.path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return os.open(region.path + DELETED_SUFFIX, os.O_RDONLY | os.O_CLOEXEC)


class SendSocket:
    """A duplicate of one connection's socket descriptor, for its ``FileSender``s.

    Made on the connection's first ``FileAnswer`` and kept until it closes. A worker thread
    may be sending on it when the connection goes: ``close`` then waits for ``release``, so
    the descriptor number is never reused under a running ``sendfile``.
    """

    __slots__ = ("busy", "closing", "sock")

    def __init__(self, socket_fd: int) -> None:
        self.sock = socket.socket(fileno=os.dup(socket_fd))
        self.busy = False
        self.closing = False

    def close(self) -> None:
        self.closing = True
        if not self.busy:
            self.sock.close()

    def release(self) -> None:
        self.busy = False
        if self.closing:
            self.sock.close()


class FileSender:
    """Sends one ``FileAnswer`` on a connection's ``SendSocket`` (non-blocking).

    ``done`` resolves when everything was written, or fails with the ``OSError`` that stopped
    it (the peer went away: EPIPE, ECONNRESET). ``cancel()`` stops it (the connection closed):
    the file descriptors are closed as soon as no worker thread uses them.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        send_socket: SendSocket,
        answer: FileAnswer,
        run_blocking: Callable[[Callable[[], bool]], Awaitable[bool]],
        *,
        in_thread: bool = False,
    ) -> None:
        self._loop = loop
        self._run_blocking = run_blocking
        self._send_socket = send_socket
        self._sock = send_socket.sock
        self._fds: list[int] = []
        # pieces: bytes, or (file descriptor, position, length)
        self._pieces: list[bytes | tuple[int, int, int]] = []
        try:
            if answer.head:
                self._pieces.append(answer.head)
            for region in answer.regions:
                if region.length > 0:
                    fd = _open_region(region)
                    self._fds.append(fd)
                    self._pieces.append((fd, region.position, region.length))
            if answer.tail:
                self._pieces.append(answer.tail)
        except BaseException:
            self._close_fds()
            raise
        #: Steps in a worker thread (after a slow step on the loop, or asked for).
        self._in_thread = in_thread
        self._index = 0
        self._offset = 0
        self._stepping = False  # a worker thread is sending
        self._waiting = False  # add_writer is armed
        self._cancelled = False
        self.done: asyncio.Future[None] = loop.create_future()

    def start(self) -> asyncio.Future[None]:
        self._step()
        return self.done

    def cancel(self) -> None:
        """Stop sending (the connection is gone); safe to call at any time, more than once."""
        if self._cancelled:
            return
        self._cancelled = True
        if self._waiting:
            self._waiting = False
            self._loop.remove_writer(self._sock.fileno())
        if not self._stepping:
            self._close_fds()
        if not self.done.done():
            self.done.cancel()

    # ------------------------------------------------------------------ internals

    def _step(self) -> None:
        if not self._in_thread:
            started = time.perf_counter()
            try:
                finished = self._send_some()
            except OSError as exc:
                self._fail(exc)
                return
            if time.perf_counter() - started > SLOW_STEP_S:
                self._in_thread = True  # disk reads: keep them off the loop from now on
            self._after(finished)
            return
        self._stepping = True
        self._send_socket.busy = True
        step = asyncio.ensure_future(self._run_blocking(self._send_waiting), loop=self._loop)
        step.add_done_callback(self._stepped)

    def _stepped(self, step: asyncio.Future[bool]) -> None:
        self._stepping = False
        self._send_socket.release()
        if self._cancelled:
            self._close_fds()
            return
        if step.cancelled():
            self._fail(OSError("sendfile step cancelled"))
            return
        exc = step.exception()
        if exc is not None:
            self._fail(exc if isinstance(exc, OSError) else OSError(str(exc)))
            return
        self._after(step.result())

    def _after(self, finished: bool) -> None:
        if self._cancelled:
            self._close_fds()
            return
        if finished:
            self._close_fds()
            if not self.done.done():
                self.done.set_result(None)
            return
        self._waiting = True
        self._loop.add_writer(self._sock.fileno(), self._writable)

    def _writable(self) -> None:
        if not self._waiting:
            return
        self._waiting = False
        self._loop.remove_writer(self._sock.fileno())
        self._step()

    def _fail(self, exc: OSError) -> None:
        self._close_fds()
        if not self.done.done():
            self.done.set_exception(exc)

    def _send_waiting(self) -> bool:
        """In a worker thread: send, waiting up to ``THREAD_WAIT_S`` in all for the socket to
        drain while the client reads (one thread round trip for most answers); a client that
        reads slower than that is waited for on the loop (``add_writer``), not in a thread."""
        deadline = time.monotonic() + THREAD_WAIT_S
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLOUT)
        while not self._send_some():
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0 or not poller.poll(left_ms):
                return False
        return True

    def _send_some(self) -> bool:
        """Send until everything is out (True) or the socket is full (False)."""
        pieces = self._pieces
        sock = self._sock
        last = len(pieces) - 1
        while self._index <= last:
            piece = pieces[self._index]
            try:
                if isinstance(piece, bytes):
                    # MSG_MORE: the head joins the record data in the same segments
                    flags = socket.MSG_MORE if self._index < last else 0
                    sent = sock.send(memoryview(piece)[self._offset :], flags)
                    length = len(piece)
                else:
                    fd, position, length = piece
                    sent = os.sendfile(
                        sock.fileno(), fd, position + self._offset, length - self._offset
                    )
                    if sent == 0:
                        raise OSError(f"the segment file ended before {position + length}")
            except BlockingIOError:
                return False
            self._offset += sent
            if self._offset >= length:
                self._index += 1
                self._offset = 0
        return True

    def _close_fds(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


async def write_read(
    transport: Any,
    answer: FileAnswer,
    run_blocking: Callable[[Callable[[], list[bytes]]], Awaitable[list[bytes]]],
    encrypt: Callable[[bytes], bytes] | None,
) -> None:
    """The bytes way: read the regions (in a worker thread from ``BLOCKING_READ_BYTES`` on)
    and write them through ``transport``, through ``encrypt`` first on TLS."""
    if answer.size >= BLOCKING_READ_BYTES:
        chunks = await run_blocking(lambda: read_chunks(answer))
    else:
        chunks = read_chunks(answer)
    if transport.is_closing():
        return
    transport.writelines([encrypt(c) for c in chunks] if encrypt is not None else chunks)


def sender_for(transport: Any, answer: FileAnswer) -> int | None:
    """The socket descriptor a ``FileSender`` may use for ``answer`` on ``transport``, or None
    (no socket, or bytes still queued in the transport: they must go first)."""
    if transport.get_write_buffer_size() != 0:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    fd = sock.fileno()
    return fd if fd >= 0 else None
