"""The TCP side: one asyncio Protocol per client connection, a thin adapter of its channel.

The protocol state of a connection (framing, answers in request order, backpressure, mutes,
close-after-error, idle time) is ``KafkaChannel``'s (``broker/kafka_channel.py``, sans-io, as
h11's ``Connection`` is for HTTP). ``KafkaConnection`` feeds it the bytes a read returned (after
TLS), dispatches each frame it hands out to the router at once (decoding is synchronous), runs each
handler at once up to its first suspension (most never suspend: their answer is written without a
task; one that suspends goes on as a task, so pipelined requests are processed concurrently),
writes what the channel returns, and pauses reading while the channel says so (``wants_read``).

A big frame (a Produce of a 32 MiB batch) is gathered by the reader into one buffer of its
final size and handed on as a read-only view of it: the records of its batch stay a view of it
too (``protocol.fast.produce``).

Client quotas (KIP-219): a ``Throttled`` answer is written at once, then the connection is
muted (not read, no further frame taken) for its throttle time (a timer here, the state in the
channel).

Limits (``ConnectionQuotas``, shared by all listeners): a connection past ``max.connections``
or past ``max.connections.per.ip`` for its address is closed as soon as it is accepted, as
Kafka closes a connection over its per-IP quota, and counts are released when a connection
closes. Kafka divergence: at ``max.connections`` Kafka's acceptor waits for a free slot instead
of closing. A connection that sent nothing and has no answer pending for longer than
``connections.max.idle.ms`` is closed by a periodic check on the loop (-1: never).

The broker is seen through ``ListenerBroker`` (metrics, share sessions, the worker pool).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from tidelog.broker.connection_quotas import ConnectionQuotas
from tidelog.broker.kafka_channel import KafkaChannel, Slot
from tidelog.broker.metrics import metrics_of
from tidelog.broker.request_channel import Answer, Close, Throttled
from tidelog.broker.router import Router
from tidelog.broker.security.tls import TlsLayer
from tidelog.broker.sendfile import FileAnswer, FileSender, SendSocket, sender_for, write_read

if TYPE_CHECKING:
    from tidelog.broker.metrics import Metrics
    from tidelog.broker.security.sasl import ConnectionSecurity
    from tidelog.broker.security.service import BrokerSecurity
    from tidelog.broker.share.coordinator import ShareCoordinator

log = logging.getLogger("tidelog.server")

__all__ = ("WRITE_HIGH_WATER", "KafkaConnection", "ListenerBroker", "ListenerServer")

T = TypeVar("T")

#: Write-buffer high-water mark (bytes queued in the transport before pause_writing).
WRITE_HIGH_WATER = 4 * 1024 * 1024
#: How long a connection that failed authentication stays open after its failure answer,
#: unless the client closes first (see ``_before_authentication``).
FAILED_AUTH_CLOSE_LINGER_S = 1.0


class ListenerBroker(Protocol):
    """What a listener's connections use of the broker (``broker.app.Broker`` is one)."""

    @property
    def metrics(self) -> Metrics: ...

    @property
    def share_groups(self) -> ShareCoordinator | None: ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T: ...


# ---------------------------------------------------------------------- handlers run eagerly
# A handler's coroutine is stepped at once up to its first suspension (``_submit``): most requests
# never suspend (a produce with acks 0/1, a fetch with data ready, metadata...), so their answer is
# written without a task or a loop turn. ``_finish`` wraps one that did suspend, on what it
# yielded, so a task (``loop.create_task``) can run the rest.


def _resume(coro: Any, waiting_on: Any) -> Generator[Any, Any, Answer]:
    """Go on with a coroutine that already ran up to yielding ``waiting_on`` (what
    ``yield from`` does, from the middle): the task running this waits on what it yields."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # cancellation or the awaited future's error
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as done:
                return cast(Answer, done.value)
            continue
        try:
            waiting_on = coro.send(sent)
        except StopIteration as done:
            return cast(Answer, done.value)


class _Resume:
    __slots__ = ("coro", "waiting_on")

    def __init__(self, coro: Any, waiting_on: Any) -> None:
        self.coro = coro
        self.waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, Answer]:
        return _resume(self.coro, self.waiting_on)


async def _finish(coro: Any, waiting_on: Any) -> Answer:
    """The rest of a handler that suspended during its eager first step (see ``_submit``)."""
    return await _Resume(coro, waiting_on)


_IMMEDIATE = (bytes, list, Close, FileAnswer, Throttled, type(None))


class KafkaConnection(asyncio.Protocol):
    """One client connection: the asyncio adapter of its ``KafkaChannel`` (TLS, handlers run,
    timers, sendfile)."""

    def __init__(self, server: ListenerServer) -> None:
        self._server = server
        self._dispatch = server.router.dispatch
        self._metrics = server.metrics
        #: The loop running the connection, taken once: ``asyncio.get_running_loop`` costs a
        #: ``getpid`` system call each time.
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        #: The protocol state (sans-io; ``broker/kafka_channel.py``).
        self.channel = KafkaChannel(server.max_request_bytes, server.now)
        self._reading_paused = False
        #: While frames are taken: the plaintext answers ready at once, written together.
        self._corked: list[bytes] | None = None
        self._drained: asyncio.Future[None] | None = None
        #: A ``FileAnswer`` being sent (answers behind it wait): its future, and its sender
        #: when it goes by sendfile.
        self._sending: asyncio.Future[None] | None = None
        self._sender: FileSender | None = None
        self._send_socket: SendSocket | None = None
        self._admitted = False
        #: The timer of a lingering close (``Close.linger_s``), if one is set.
        self._linger: asyncio.TimerHandle | None = None
        #: The timer ending a quota mute (``Throttled``), while muted.
        self._throttle: asyncio.TimerHandle | None = None
        #: Authentication state on SSL/SASL listeners (broker.security.sasl), else None.
        self._session: ConnectionSecurity | None = None
        self._tls: TlsLayer | None = None
        self.peer_host = "?"
        self.peer_port = 0

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer_host, self.peer_port = str(peer[0]), int(peer[1])
        refused = self._server.quotas.admit(self.peer_host)
        if refused is not None:
            log.info("refused connection from %s:%d: %s", self.peer_host, self.peer_port, refused)
            self.channel.closing = True
            transport.close()
            return
        self._admitted = True
        if self._server.ssl_context is not None:
            # TLS runs in the connection (broker.security.tls.TlsLayer); the authentication
            # state starts once the handshake is done.
            self._tls = TlsLayer(self._server.ssl_context)
        elif self._server.security is not None and not self._start_session(None):
            return
        self.channel.last_active = self._server.now()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._server.connections.add(self)
        self._metrics.connection_opened()

    def _start_session(self, peercert: dict[str, Any] | None) -> bool:
        """The connection's authentication state; False when it was closed (a client
        certificate no mapping rule accepts)."""
        security = self._server.security
        assert security is not None
        session = security.session_for(self._server.name, self.peer_host, self.peer_port)
        self._session = session
        if session is None:
            return True
        refused = session.peer_certificate(peercert)
        if refused is not None:
            self.close(refused)
            return False
        if not session.authenticated:
            # Before authentication a frame may be at most sasl.server.max.receive.size.
            self.channel.limit_frames(session.listener.max_receive_size)
        return True

    def _tls_received(self, tls: TlsLayer, data: bytes) -> bytes | None:
        """Decrypt; None when nothing is left to process (or the connection was closed)."""
        try:
            plain, out, established = tls.receive(data)
        except (ssl.SSLError, ValueError) as exc:
            reason = f"TLS handshake failed on listener {self._server.name}: " + (
                getattr(exc, "reason", None) or str(exc)
            )
            security = self._server.security
            # Logged once a minute per client address and reason (counted every time).
            logged = security is None or security.tls_failed(self.peer_host, reason)
            self.close(reason if logged else None)
            return None
        if out and self._transport is not None:
            self._transport.write(out)
        if tls.peer_closed:  # close_notify: like a TCP EOF
            self.eof_received()
            return None
        if established:
            log.debug(
                "TLS (%s) established with %s:%d", tls.version(), self.peer_host, self.peer_port
            )
            if self._server.security is not None and not self._start_session(tls.peercert()):
                return None
        return plain or None

    def _before_authentication(self, session: ConnectionSecurity, frame: memoryview) -> None:
        """A frame of a SASL connection not yet authenticated (see broker.security.sasl)."""
        outcome = session.intercept(frame)
        if outcome is None:
            outcome = self._dispatch(
                frame, self.peer_host, self.peer_port, self._server.name, session
            )
        self._submit(outcome)
        if session.failed is not None:
            # Close without a line of its own: BrokerSecurity logged it (rate-limited).
            # Kafka divergence: Kafka closes right after the failure answer; kafka-python drops
            # an answer that arrives in the same read as the end of the stream (and then retries
            # until its timeout), so the close lingers until the client closes (it does on the
            # error) or sends anything more (session.intercept closes then), at most
            # FAILED_AUTH_CLOSE_LINGER_S.
            self._submit(Close("", linger_s=FAILED_AUTH_CLOSE_LINGER_S))
        elif session.authenticated:
            self.channel.authenticated()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        if self._linger is not None:
            self._linger.cancel()
        if self._throttle is not None:
            self._throttle.cancel()
            self._throttle = None
        server = self._server
        server.quotas.release(self.peer_host)
        server.connections.discard(self)
        self._metrics.connection_closed()
        # Share sessions live on their connection (as Kafka's ShareSessionCache): its close
        # ends them and releases what their members hold.
        share_groups = server.broker.share_groups if server.broker is not None else None
        if share_groups is not None:
            share_groups.connection_closed(self.peer_host, self.peer_port)
        if self._sender is not None:
            self._sender.cancel()
        if self._sending is not None:
            self._sending.cancel()
        if self._send_socket is not None:
            self._send_socket.close()  # after a worker thread's step, if one runs
        for running in self.channel.connection_lost():
            cast(asyncio.Future[Answer], running).cancel()  # tasks and long-poll futures
        self._set_drained()  # nothing more will be written: shutdown need not wait

    def pause_writing(self) -> None:
        self.channel.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.channel.write_paused = False
        self._update_reading()
        self._set_drained()

    def data_received(self, data: bytes) -> None:
        self._metrics.bytes_in(len(data))
        channel = self.channel
        if channel.closing:
            return
        if self._tls is not None:
            decrypted = self._tls_received(self._tls, data)
            if decrypted is None:
                return
            data = decrypted
        channel.receive_data(data)
        self._take_frames()

    def _take_frames(self) -> None:
        """Dispatch the frames the channel hands out: it stops at MAX_IN_FLIGHT unanswered
        requests, a full write buffer or a mute, even inside one read; the frames it holds are
        taken when that ends (``_update_reading``). From the second frame of one read on, the
        answers ready at once are held and go out together (pipelined requests: one write for
        them, not one each); a lone request is written as before, with nothing held."""
        channel = self.channel
        dispatch = self._dispatch
        name = self._server.name
        first = True
        corked: list[bytes] | None = None
        try:
            while True:
                frame = channel.next_frame()
                if frame is None:
                    break
                if first:
                    first = False
                elif corked is None and self._corked is None:
                    corked = self._corked = []
                if isinstance(frame, Close):
                    self.close(frame.reason)
                    return
                session = self._session
                if session is None:
                    self._submit(dispatch(frame, self.peer_host, self.peer_port, name, None))
                    continue
                if session.authenticated and session.expires_at is not None:
                    # KIP-368: a SaslHandshake re-authenticates; past the session's end, close.
                    refused = session.check_session(frame)
                    if refused is not None:
                        self._submit(refused)
                        return
                if not session.authenticated:
                    self._before_authentication(session, frame)
                else:
                    self._submit(dispatch(frame, self.peer_host, self.peer_port, name, session))
            self._update_reading()
        finally:
            if corked is not None:
                self._corked = None
                transport = self._transport
                if corked and transport is not None and not transport.is_closing():
                    self._flush_corked(transport, corked)

    def eof_received(self) -> bool | None:
        # The client closed its side: finish the answers we owe, then close.
        self.channel.peer_closed()
        self._after_drain_close()
        return True

    # ------------------------------------------------------------------ answers in order

    def _submit(self, outcome: Any) -> None:
        channel = self.channel
        if isinstance(outcome, _IMMEDIATE):
            answer = channel.answer(outcome)
            if answer is not None:
                self._write(answer)
            return
        if isinstance(outcome, asyncio.Future):  # a long poll answered by callbacks
            outcome.add_done_callback(functools.partial(self._task_done, channel.pending(outcome)))
            return
        # Run the handler at once, up to its first suspension: most requests (produce with
        # acks 0/1, fetch with data ready, metadata...) never suspend, and a task plus a loop
        # turn cost more than such a handler. One that suspends goes on in a task from there.
        coro = cast(Coroutine[Any, Any, Answer], outcome)
        try:
            waiting_on = coro.send(None)
        except StopIteration as done:
            self._submit(done.value)
            return
        except Exception as exc:
            self._submit(Close(f"request failed: {exc!r}"))
            return
        task = self._loop.create_task(_finish(coro, waiting_on))
        task.add_done_callback(functools.partial(self._task_done, channel.pending(task)))

    def _task_done(self, slot: Slot, task: asyncio.Future[Answer]) -> None:
        if self.channel.closed:
            return
        answer: Answer
        if task.cancelled():
            answer = Close("request cancelled")
        else:
            exc = task.exception()
            answer = Close(f"request failed: {exc!r}") if exc is not None else task.result()
        self._write_all(self.channel.answered(slot, answer))

    def _write_all(self, answers: list[Answer]) -> None:
        for answer in answers:
            self._write(answer)
        self._update_reading()
        self._after_drain_close()

    def _write(self, answer: Answer) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        corked = self._corked
        if type(answer) is bytes and self._tls is None:
            self._metrics.bytes_out(len(answer))
            if corked is not None:
                corked.append(answer)
            else:
                transport.write(answer)
            return
        if corked:  # what was held goes first
            self._flush_corked(transport, corked)
        if isinstance(answer, Throttled):
            self._mute(answer.throttle_ms)
            answer = answer.answer
            if answer is None:
                return
        if isinstance(answer, Close):
            if answer.linger_s > 0:
                if self._linger is None:
                    self._linger = self._loop.call_later(answer.linger_s, self.close, answer.reason)
            else:
                self.close(answer.reason)
        elif isinstance(answer, FileAnswer):
            self._send_file(transport, answer)
        elif self._tls is not None:
            chunks = [answer] if isinstance(answer, bytes) else cast(list[bytes], answer)
            self._metrics.bytes_out(sum(map(len, chunks)))
            transport.writelines([self._tls.send(c) for c in chunks])
        elif isinstance(answer, bytes):
            self._metrics.bytes_out(len(answer))
            transport.write(answer)
        elif answer is not None:
            self._metrics.bytes_out(sum(map(len, answer)))
            transport.writelines(answer)

    def _flush_corked(self, transport: asyncio.Transport, corked: list[bytes]) -> None:
        """Write the answers held while frames are taken (one system call)."""
        if len(corked) == 1:
            transport.write(corked[0])
        else:
            transport.writelines(corked)
        corked.clear()

    def _send_file(self, transport: asyncio.Transport, answer: FileAnswer) -> None:
        """Start sending ``answer`` (record data from the segment files); the answers behind
        it wait until it is out (``_sent``). Plaintext with nothing queued in the transport:
        sendfile; else the regions are read (in a worker thread when large) and written."""
        self._metrics.bytes_out(len(answer))
        socket_fd = None if self._tls is not None else sender_for(transport, answer)
        sending: asyncio.Future[None]
        if socket_fd is not None:
            try:
                if self._send_socket is None:
                    self._send_socket = SendSocket(socket_fd)
                sender = FileSender(self._loop, self._send_socket, answer, self._run_blocking)
            except OSError as exc:  # the segment file could not be opened
                self.close(f"cannot send fetch data: {exc}")
                return
            self._sender = sender
            sending = sender.start()
        else:
            tls = self._tls
            sending = self._loop.create_task(
                write_read(transport, answer, self._run_blocking, tls.send if tls else None)
            )
        self._sending = sending
        sending.add_done_callback(self._sent)

    async def _run_blocking(self, fn: Any) -> Any:
        broker = self._server.broker
        if broker is not None:
            return await broker.run_blocking(fn)
        return await self._loop.run_in_executor(None, fn)

    def _sent(self, sending: asyncio.Future[None]) -> None:
        if sending is not self._sending:
            return
        self._sending = None
        self._sender = None
        if sending.cancelled():  # the connection went
            return
        exc = sending.exception()
        if exc is not None:
            # Mostly the client going away mid-answer (EPIPE, ECONNRESET): close quietly.
            log.info(
                "sending a fetch answer to %s:%d failed: %s; closing the connection",
                self.peer_host,
                self.peer_port,
                exc,
            )
            self.close()
            return
        self._write_all(self.channel.file_sent())  # the answers queued behind it

    def _mute(self, throttle_ms: int) -> None:
        """Stop reading for ``throttle_ms`` (a client quota's throttle; a longer one wins)."""
        if self.channel.mute(throttle_ms) is None:
            return
        if self._throttle is not None:
            self._throttle.cancel()
        self._throttle = self._loop.call_later(throttle_ms / 1000, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        channel = self.channel
        channel.unmute()
        until = channel.muted_until
        if until is not None:  # the timer ran a little early
            delay = max(until - self._server.now(), 0.001)
            self._throttle = self._loop.call_later(delay, self._unmute)
            return
        self._throttle = None
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        channel = self.channel
        read = channel.wants_read
        if not read:
            if not self._reading_paused:
                self._reading_paused = True
                transport.pause_reading()
            return
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        if channel.reader.has_frame():  # (``wants_read`` holds: checked above)
            self._take_frames()  # complete frames held back by backpressure

    # ------------------------------------------------------------------ closing

    def close(self, reason: str | None = None) -> None:
        """Close now (answers not yet written are dropped)."""
        if reason:
            log.warning("closing connection from %s:%d: %s", self.peer_host, self.peer_port, reason)
        self.channel.closing = True
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if self._corked:  # answers of requests before the one that closes
                self._flush_corked(transport, self._corked)
            transport.close()

    def idle_for(self, now: float) -> float:
        """Seconds since the last byte in or answer out; 0 while an answer is owed."""
        return self.channel.idle_for(now)

    def _after_drain_close(self) -> None:
        channel = self.channel
        if channel.closing and channel.drained:
            self._set_drained()
            if self._transport is not None and not self._transport.is_closing():
                self._transport.close()

    def _set_drained(self) -> None:
        channel = self.channel
        if (
            self._drained is not None
            and not self._drained.done()
            and channel.drained
            and not channel.write_paused
        ):
            self._drained.set_result(None)

    async def finish(self, timeout: float) -> None:
        """Stop reading, answer what is in flight (up to ``timeout`` s), then close."""
        channel = self.channel
        channel.closing = True
        self._update_reading()
        if not channel.drained or channel.write_paused:
            self._drained = self._loop.create_future()
            self._set_drained()
            try:
                await asyncio.wait_for(asyncio.shield(self._drained), timeout)
            except TimeoutError:
                log.warning(
                    "connection %s:%d still had %d requests in flight at shutdown",
                    self.peer_host,
                    self.peer_port,
                    channel.in_flight,
                )
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


class ListenerServer:
    """One listening socket (one entry of ``listeners``) and its connections."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        router: Router,
        max_request_bytes: int,
        *,
        quotas: ConnectionQuotas | None = None,
        idle_ms: int = -1,
        security: BrokerSecurity | None = None,
        ssl_context: ssl.SSLContext | None = None,
        broker: ListenerBroker | None = None,
    ) -> None:
        self.name = name
        #: None: PLAINTEXT without security set up.
        self.security = security
        #: What the connections use of the broker (None: a listener on its own, in tests).
        self.broker = broker
        self.metrics = metrics_of(broker)
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.router = router
        self.max_request_bytes = max_request_bytes
        self.quotas = quotas or ConnectionQuotas(2**31 - 1, 2**31 - 1)
        self.idle_ms = idle_ms
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.Server | None = None
        self._idle_check: asyncio.Task[None] | None = None

    @staticmethod
    def now() -> float:
        """The clock of idle times (monotonic seconds)."""
        return time.monotonic()

    async def start(self) -> None:
        """``bind`` then ``serve``."""
        await self.bind()
        await self.serve()

    async def bind(self) -> None:
        """Take the port (an address in use fails here) without accepting connections yet:
        the broker binds first, as Kafka's SocketServer does, and serves once it has loaded."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self),
            host=self.host,
            port=self.port,
            reuse_address=True,
            backlog=1024,
            start_serving=False,
        )
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def serve(self) -> None:
        """Listen and accept connections on the port ``bind`` took."""
        assert self._server is not None, "bind() first"
        await self._server.start_serving()
        if self.idle_ms >= 0:
            self._idle_check = asyncio.ensure_future(self._close_idle())

    async def _close_idle(self) -> None:
        """Close connections idle past ``connections.max.idle.ms`` (a scan every quarter)."""
        limit_s = self.idle_ms / 1000
        tick = min(max(limit_s / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(tick)
            now = self.now()
            for connection in [c for c in self.connections if c.idle_for(now) > limit_s]:
                log.debug(
                    "closing connection from %s:%d: idle for more than %d ms "
                    "(connections.max.idle.ms)",
                    connection.peer_host,
                    connection.peer_port,
                    self.idle_ms,
                )
                connection.close()

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._idle_check is not None:
            self._idle_check.cancel()

    async def finish_connections(self, timeout: float) -> None:
        connections = list(self.connections)
        if connections:
            await asyncio.gather(*(c.finish(timeout) for c in connections))
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except TimeoutError:
                pass
