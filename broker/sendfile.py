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
  until it drains. Record data below ``BLOCKING_READ_BYTES`` is sent on the loop (a page-cache
  copy, like the ``pread`` it replaces); above it every step runs in a worker thread (a cold
  segment means disk reads). The duplicates keep the socket and the segment file open until
  the sender is done, whatever the transport, retention or the descriptor cache close meanwhile.
- TLS, or bytes still queued in the transport: ``read_chunks`` (``pread``, in a worker thread
  when large) and the connection's normal write.

Why 64 KiB: ``scripts/bench/sendfile_cost.py`` (RESULTS.md, issue 20) measures the broker's CPU
per answer of both ways; below ~64 KiB the copy that sendfile saves costs less than the
descriptor duplication and the extra system calls it adds.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from tidelog.storage.info import FileRegion
from tidelog.storage.segment import DELETED_SUFFIX

__all__ = ("BLOCKING_READ_BYTES", "SENDFILE_MIN_BYTES", "FileAnswer", "FileSender", "read_chunks")

#: Fetch answers with at least this much record data (one partition) are sent from the files.
SENDFILE_MIN_BYTES = 64 * 1024
#: Reads (and sendfile steps) of at least this many bytes run in a worker thread.
BLOCKING_READ_BYTES = 256 * 1024


class FileAnswer:
    """A framed answer: ``head``, then the regions' bytes, then ``tail``."""

    __slots__ = ("head", "regions", "size", "tail")

    def __init__(self, head: bytes, regions: tuple[FileRegion, ...], tail: bytes) -> None:
        self.head = head
        self.regions = regions
        self.tail = tail
        #: Bytes of record data (the regions).
        self.size = sum(r.length for r in regions)

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
    fd = region.fileno()
    if fd is not None:
        try:
            return os.dup(fd)
        except OSError:
            pass  # closed meanwhile: open by path
    try:
        return os.open(region.path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return os.open(region.path + DELETED_SUFFIX, os.O_RDONLY | os.O_CLOEXEC)


class FileSender:
    """Sends one ``FileAnswer`` on a duplicate of a non-blocking socket descriptor.

    ``done`` resolves when everything was written, or fails with the ``OSError`` that stopped
    it (the peer went away: EPIPE, ECONNRESET). ``cancel()`` stops it (the connection closed):
    the descriptors are closed as soon as no worker thread uses them.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        socket_fd: int,
        answer: FileAnswer,
        run_blocking: Callable[[Callable[[], bool]], Awaitable[bool]],
    ) -> None:
        self._loop = loop
        self._run_blocking = run_blocking
        self._fds: list[int] = []
        self._sock = -1
        # pieces: bytes, or (file descriptor, position, length)
        self._pieces: list[bytes | tuple[int, int, int]] = []
        try:
            self._sock = os.dup(socket_fd)
            self._fds.append(self._sock)
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
        self._in_thread = answer.size >= BLOCKING_READ_BYTES
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
            self._loop.remove_writer(self._sock)
        if not self._stepping:
            self._close_fds()
        if not self.done.done():
            self.done.cancel()

    # ------------------------------------------------------------------ internals

    def _step(self) -> None:
        if not self._in_thread:
            try:
                finished = self._send_some()
            except OSError as exc:
                self._fail(exc)
                return
            self._after(finished)
            return
        self._stepping = True
        step = asyncio.ensure_future(self._run_blocking(self._send_some))
        step.add_done_callback(self._stepped)

    def _stepped(self, step: asyncio.Future[bool]) -> None:
        self._stepping = False
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
        self._loop.add_writer(self._sock, self._writable)

    def _writable(self) -> None:
        if not self._waiting:
            return
        self._waiting = False
        self._loop.remove_writer(self._sock)
        self._step()

    def _fail(self, exc: OSError) -> None:
        self._close_fds()
        if not self.done.done():
            self.done.set_exception(exc)

    def _send_some(self) -> bool:
        """Send until everything is out (True) or the socket is full (False)."""
        pieces = self._pieces
        sock = self._sock
        while self._index < len(pieces):
            piece = pieces[self._index]
            try:
                if isinstance(piece, bytes):
                    sent = os.write(sock, memoryview(piece)[self._offset :])
                    length = len(piece)
                else:
                    fd, position, length = piece
                    sent = os.sendfile(sock, fd, position + self._offset, length - self._offset)
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
