"""Request routing: frame -> header -> handler -> framed answer.

Handlers live in ``broker/handlers/``: every module there that defines ``SPEC: HandlerSpec``
serves that API for ``SPEC.min_version..SPEC.max_version``, and the ApiVersions answer lists
exactly those ranges. ``broker/api_table.py`` repeats them (checked by a test), so the broker's
router answers ApiVersions without importing the handlers: each is imported on the first request
of its API, or by ``load_all`` as the broker starts. While it starts (``hold_until``), the APIs a
producer starts with (ApiVersions, Metadata, InitProducerId, Produce: ``READY_AT_START``, their
handlers loaded before the first answer) are answered at once, unless transactional; every other
request waits until the coordinators are up. A handler module may also define
``error_response(ctx, request, error_code) -> response`` to shape the answer the router's
catch-all sends when the handler raises (per-partition errors for APIs without a top-level
``error_code``); without it the router uses the schema's top-level ``error_code`` or closes the
connection. A handler may also return ``Close(reason)`` (close after the earlier answers) or a
``RawBody`` (a body it encoded itself).

Client quotas (``broker/client_quota_manager.py``), once any is set: every request goes through
``handle`` (no ``at_once``), its handler's time on the loop is recorded for the request quota,
a Produce request's size and a Fetch answer's size for the byte quotas; a request over quota
answers with its throttle time (``throttle_time_ms``; a Fetch answers empty, as Kafka's) as a
``Throttled`` answer, after which the connection is muted that long (KIP-219). A module may
define ``with_throttle_time(ctx, response, throttle_ms)`` for a ``RawBody`` it answers, and
``throttled_response(ctx, request, throttle_ms)`` to answer a throttled request otherwise.

Kafka behaviour kept here:
- an unknown API key, a version outside the handler's range, or a frame that does not parse
  closes that connection (Kafka: InvalidRequestException -> close);
- ApiVersions of any version we cannot serve (including versions kio does not know) gets the
  KIP-511 answer: v0 body, UNSUPPORTED_VERSION, our ApiVersions range.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import pkgutil
import time
from collections.abc import Callable, Coroutine, Generator, Mapping
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.api_table import API_TABLE, HANDLERS_PACKAGE, ApiEntry
from tidelog.broker.client_quota_manager import SECONDS_TO_PERCENTAGE, user_of
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.metrics import EXCEPTION, LONG_POLL_WAIT, metrics_of
from tidelog.broker.request_channel import Answer, Close, Outcome, RawBody, Throttled
from tidelog.broker.security.principal import ANONYMOUS
from tidelog.broker.sendfile import FileAnswer
from tidelog.protocol import codec
from tidelog.protocol.errors import ErrorCode, FrameDecodeError
from tidelog.protocol.fast.fetch import parse_fetch_frame
from tidelog.protocol.fast.produce import parse_produce_frame
from tidelog.protocol.schema import top_level_error_response

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import BrokerView

log = logging.getLogger("tidelog.router")

__all__ = ("READY_AT_START", "Router", "discover_handlers")

PRODUCE_KEY = 0
FETCH_KEY = 1
METADATA_KEY = 3
INIT_PRODUCER_ID_KEY = 22
#: The APIs answered at once while the coordinators load (``Router.hold_until``): what a
#: producer sends first. A broker is ready when it answers these, not ApiVersions alone.
READY_AT_START = frozenset(
    (codec.API_VERSIONS_KEY, METADATA_KEY, INIT_PRODUCER_ID_KEY, PRODUCE_KEY)
)
#: SaslHandshake and SaslAuthenticate: ready at start too when a listener uses SASL.
SASL_KEYS = frozenset((17, 36))
#: APIs read by a lean one-pass parser before (instead of) kio: -> (correlation id, client id,
#: request with kio's attribute names), or None for anything unusual.
_LEAN_PARSERS: dict[int, Callable[[bytes | memoryview], tuple[int, str | None, Any] | None]] = {
    PRODUCE_KEY: parse_produce_frame,
    FETCH_KEY: parse_fetch_frame,
}


def discover_handlers(
    package: str = HANDLERS_PACKAGE,
) -> tuple[dict[int, HandlerSpec], dict[int, ModuleType]]:
    """Import every module of ``package`` that defines ``SPEC`` (api_key -> spec, module)."""
    pkg = importlib.import_module(package)
    specs: dict[int, HandlerSpec] = {}
    modules: dict[int, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, HandlerSpec):
            continue
        if spec.api_key in specs:
            raise RuntimeError(
                f"API key {spec.api_key} is claimed by both {modules[spec.api_key].__name__} "
                f"and {module.__name__}"
            )
        for version in range(spec.min_version, spec.max_version + 1):
            if not codec.is_known(spec.api_key, version):
                raise RuntimeError(
                    f"{module.__name__} claims {spec.name} v{version}, which kio does not know"
                )
        specs[spec.api_key] = spec
        modules[spec.api_key] = module
    return specs, modules


def _row(spec: HandlerSpec | ApiEntry) -> tuple[Any, ...]:
    return (
        spec.api_key,
        spec.name,
        spec.min_version,
        spec.max_version,
        spec.advertised_min_version,
    )


class Router:
    """Dispatches decoded requests to handlers; one per broker."""

    def __init__(
        self,
        broker: BrokerView,
        specs: Mapping[int, HandlerSpec] | None = None,
        modules: Mapping[int, ModuleType] | None = None,
    ) -> None:
        self.broker = broker
        self._metrics = metrics_of(broker)
        #: Without ``specs`` (the broker's router): every API of ``API_TABLE``, its handler
        #: module imported on first use (``load``, ``load_all``). With ``specs``: those only.
        self._table: dict[int, ApiEntry] = (
            {e.api_key: e for e in API_TABLE} if specs is None else {}
        )
        self.specs: dict[int, HandlerSpec] = dict(specs or {})
        self._modules: dict[int, ModuleType] = dict(modules or {})
        # With an authorizer, Produce and Fetch take ``handle`` (which checks ACLs) instead of
        # the context-free ``at_once`` path.
        self._at_once_ok = getattr(broker, "authorizer", None) is None
        #: Client quotas (None for a router without a broker's): once ``enabled``, every
        #: request is measured (see the module docstring).
        self._quotas = getattr(broker, "client_quotas", None)
        #: While the broker starts (``hold_until``): requests other than ApiVersions wait for
        #: this future (True: started; False: the start failed, the connection is closed).
        self._held: asyncio.Future[bool] | None = None
        self._ready = READY_AT_START

    # ------------------------------------------------------------------ handlers on demand

    # Kafka divergence: a request that needs a coordinator still loading waits for it here;
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS and the client retries after a backoff.
    def hold_until(self, started: asyncio.Future[bool], *, sasl: bool = False) -> None:
        """Answer the APIs of ``READY_AT_START`` at once (their handlers are loaded here), with
        ``sasl`` SaslHandshake and SaslAuthenticate too (a SASL listener's clients send them
        first), but hold every other request, and a transactional InitProducerId or Produce,
        until ``started`` is done (the broker listens before its coordinators are loaded)."""
        self._ready = READY_AT_START | SASL_KEYS if sasl else READY_AT_START
        for api_key in sorted(self._ready):
            self.load(api_key)
        self._held = started
        started.add_done_callback(self._release)

    def _release(self, started: asyncio.Future[bool]) -> None:
        if self._held is started:
            self._held = None

    async def _when_started(self, held: asyncio.Future[bool], frame: bytes, *where: Any) -> Answer:
        if not await asyncio.shield(held):
            return Close("the broker did not start")
        outcome = self.dispatch(frame, *where)
        if isinstance(outcome, Coroutine | asyncio.Future):
            return await outcome
        return outcome

    def load(self, api_key: int) -> HandlerSpec | None:
        """The handler of ``api_key``, its module imported now if not yet (None: no such API)."""
        spec = self.specs.get(api_key)
        entry = self._table.get(api_key)
        if spec is not None or entry is None:
            return spec
        module = importlib.import_module(f"{HANDLERS_PACKAGE}.{entry.module}")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, HandlerSpec) or _row(spec) != _row(entry):
            raise RuntimeError(
                f"{module.__name__}.SPEC {None if spec is None else _row(spec)} differs from its "
                f"row in broker/api_table.py {_row(entry)}: make them agree"
            )
        self.specs[api_key] = spec
        self._modules[api_key] = module
        return spec

    def modules(self) -> tuple[str, ...]:
        """The handler modules of the APIs not loaded yet (to import ahead, in a worker)."""
        return tuple(
            f"{HANDLERS_PACKAGE}.{e.module}" for k, e in self._table.items() if k not in self.specs
        )

    def load_all(self) -> None:
        """Import every handler not imported yet (the broker does it as it starts)."""
        for api_key in sorted(self._table):
            self.load(api_key)

    def api_ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) of every API served, by api_key."""
        if self._table:
            return [self._table[k].advertised for k in sorted(self._table)]
        ranges = []
        for k, s in sorted(self.specs.items()):
            low = s.min_version if s.advertised_min_version is None else s.advertised_min_version
            ranges.append((k, min(low, s.min_version), s.max_version))
        return ranges

    def dispatch(
        self,
        frame: bytes | memoryview,
        client_host: str,
        client_port: int,
        listener_name: str = "",
        session: Any = None,
    ) -> Outcome:
        """Decode one request frame; returns an immediate outcome or a coroutine to run.

        Decoding happens here, synchronously, so the caller may drop ``frame`` right after.
        """
        try:
            api_key, api_version, correlation_id = codec.peek_request_header(frame)
        except FrameDecodeError as exc:
            return Close(str(exc))
        held = self._held
        if held is not None and not held.done() and _waits_for_start(self._ready, api_key, frame):
            frame = frame if type(frame) is bytes else bytes(frame)
            return self._when_started(held, frame, client_host, client_port, listener_name, session)
        spec = self.specs.get(api_key)
        if spec is None:
            try:
                spec = self.load(api_key)
            except Exception:
                log.exception("cannot load the handler of API key %d", api_key)
                return Close(f"the handler of API key {api_key} does not load")
            if spec is None:
                return Close(f"unknown API key {api_key} (v{api_version})")
        if not spec.min_version <= api_version <= spec.max_version:
            low = spec.advertised_min_version
            if spec.refuse is not None and low is not None and low <= api_version:
                return self._refuse(spec, frame, api_version, correlation_id)
            if api_key == codec.API_VERSIONS_KEY:
                return codec.encode_api_versions_fallback(
                    correlation_id, spec.min_version, spec.max_version
                )
            return Close(
                f"unsupported version {api_version} of {spec.name} "
                f"(supported {spec.min_version}-{spec.max_version})"
            )
        lean_parser = _LEAN_PARSERS.get(api_key)
        if lean_parser is not None:
            # One bounds-checked pass, no kio dataclasses (Produce, Fetch); None (something
            # unusual) or a malformed frame takes the generic path below, which answers as
            # it always did.
            try:
                lean = lean_parser(frame)
            except FrameDecodeError:
                lean = None
            if lean is not None:
                quotas = self._quotas
                measured = quotas is not None and quotas.enabled  # client quotas: no at_once
                if not measured and spec.at_once is not None and self._at_once_ok:
                    answer = self._at_once(spec, api_version, correlation_id, lean, client_host)
                    if answer is not None:
                        return answer
                ctx = RequestContext(
                    api_key,
                    api_version,
                    correlation_id,
                    lean[1],
                    client_host,
                    client_port,
                    self.broker,
                    listener_name,
                    ANONYMOUS if session is None else session.principal,
                    session,
                )
                return self._run(spec, ctx, lean[2], len(frame) if measured else -1)
        try:
            header, offset = codec.decode_request_header(frame)
            request = codec.decode_request(frame, api_key, api_version, offset)
        except FrameDecodeError as exc:
            return Close(str(exc))
        ctx = RequestContext(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=header.client_id,
            client_host=client_host,
            client_port=client_port,
            broker=self.broker,
            listener_name=listener_name,
            principal=ANONYMOUS if session is None else session.principal,
            session=session,
        )
        quotas = self._quotas
        if quotas is not None and quotas.enabled:
            return self._run(spec, ctx, request, len(frame))
        return self._run(spec, ctx, request)

    def _at_once(
        self,
        spec: HandlerSpec,
        api_version: int,
        correlation_id: int,
        lean: tuple[int, str | None, Any],
        client_host: str,
    ) -> Outcome | None:
        """The handler's synchronous answer for the common request (see ``HandlerSpec.at_once``),
        or None to run ``handle``. A failure is logged and answered as ``_run`` answers one."""
        assert spec.at_once is not None
        started = time.perf_counter()
        try:
            answer = spec.at_once(self.broker, api_version, correlation_id, lean[2])
        except Exception:
            ctx = RequestContext(
                spec.api_key, api_version, correlation_id, lean[1], client_host, -1, self.broker
            )
            self._metrics.observe_request(spec.name, time.perf_counter() - started, EXCEPTION)
            return self._failed(ctx, lean[2])
        if type(answer) is bytes or type(answer) is list or type(answer) is FileAnswer:
            # errors are per partition, as for every RawBody answer: not "failed"
            self._metrics.observe_request(spec.name, time.perf_counter() - started)
        return cast(Outcome | None, answer)

    def observe(self, api_key: int, seconds: float, failed: bool = False) -> None:
        """Count one answered request of ``api_key`` whose answer is set outside ``dispatch``
        (a Produce released by the group commit)."""
        self._metrics.observe_request(self.specs[api_key].name, seconds, failed)

    def _failed(self, ctx: RequestContext, request: Any) -> Answer:
        """Log a handler's unexpected exception (call from ``except``) and answer
        UNKNOWN_SERVER_ERROR where the response allows it."""
        spec = self.specs[ctx.api_key]
        log.exception(
            "%s v%d from %s:%d (client %r, correlation %d) failed; request: %.2000r",
            spec.name,
            ctx.api_version,
            ctx.client_host,
            ctx.client_port,
            ctx.client_id,
            ctx.correlation_id,
            request,
        )
        return self._error_answer(ctx, request)

    @staticmethod
    def _refuse(
        spec: HandlerSpec, frame: bytes | memoryview, api_version: int, correlation_id: int
    ) -> Answer:
        """An advertised-but-removed version: the API's own refusal, or close if unreadable."""
        assert spec.refuse is not None
        try:
            body = spec.refuse(frame, api_version)
        except FrameDecodeError as exc:
            return Close(str(exc))
        header = codec.encode_response_header(correlation_id, 0)
        return codec.frame_size(len(header) + len(body)) + header + body

    async def _run(
        self, spec: HandlerSpec, ctx: RequestContext, request: Any, request_bytes: int = -1
    ) -> Answer:
        """Run the handler and encode its answer; ``request_bytes`` >= 0: client quotas are on
        (the request's size, for the produce byte quota)."""
        started = time.perf_counter()
        error: int = EXCEPTION
        # A long poll (Fetch) tells how long it waited, to keep that out of the latency. No
        # reset token: the handler may go on in a task, whose context is a copy.
        is_fetch = spec.api_key == FETCH_KEY
        if is_fetch:
            LONG_POLL_WAIT.set(0.0)
        try:
            if request_bytes >= 0:
                spent = [0.0]
                response = await timed(spec.handle(ctx, request), spent)
                if not isinstance(response, Close):
                    throttle_ms, response = self._throttle(
                        spec, ctx, request, response, request_bytes, spent[0]
                    )
                    if throttle_ms > 0:
                        error = int(getattr(response, "error_code", 0) or 0)
                        answer = response
                        if response is not None and not isinstance(
                            response, bytes | list | FileAnswer
                        ):
                            answer = self._encode(ctx, response)
                        return Throttled(cast(Any, answer), throttle_ms)
            else:
                response = await spec.handle(ctx, request)
            if response is None or isinstance(response, Close):
                error = EXCEPTION if response is not None else 0
                return response
            if type(response) is bytes or type(response) is list or type(response) is FileAnswer:
                error = 0
                return cast(Answer, response)  # framed by the handler itself
            error = int(getattr(response, "error_code", 0) or 0)
            return self._encode(ctx, response)
        except Exception:
            error = EXCEPTION
            return self._failed(ctx, request)
        finally:
            waited = LONG_POLL_WAIT.get() if is_fetch else 0.0
            self._metrics.observe_request(spec.name, time.perf_counter() - started, error, waited)

    def _throttle(
        self,
        spec: HandlerSpec,
        ctx: RequestContext,
        request: Any,
        response: Any,
        request_bytes: int,
        spent_s: float,
    ) -> tuple[int, Any]:
        """Record the request on the client's quota sensors (as KafkaApis does per API) and
        give its throttle time and the response carrying it."""
        quotas = self._quotas
        assert quotas is not None
        managers = quotas.managers
        user = user_of(ctx.principal)
        client = ctx.client_id or ""
        now = managers.clock_ms()
        percent = spent_s * SECONDS_TO_PERCENTAGE
        bandwidth = None
        bandwidth_ms = request_ms = 0
        size = 0
        if spec.api_key == PRODUCE_KEY:
            bandwidth = managers.produce
            bandwidth_ms = bandwidth.record(user, client, request_bytes, now)
            if response is not None:  # Kafka: no request quota for acks=0
                request_ms = managers.request.record(user, client, percent, now)
        elif spec.api_key == FETCH_KEY:
            request_ms = managers.request.record(user, client, percent, now)
            if type(response) is bytes or type(response) is list or type(response) is FileAnswer:
                bandwidth = managers.fetch
                size = sum(map(len, response)) if type(response) is list else len(response)
                bandwidth_ms = bandwidth.record(user, client, size, now)
        else:
            request_ms = managers.request.record(user, client, percent, now)
        throttle_ms = max(bandwidth_ms, request_ms)
        if throttle_ms <= 0:
            return 0, response
        if bandwidth is not None and bandwidth_ms > request_ms:
            bandwidth.throttled(user, client, throttle_ms)
        else:
            managers.request.throttled(user, client, throttle_ms)
        module = self._modules.get(spec.api_key)
        if spec.api_key == FETCH_KEY and size:
            # A throttled Fetch answers empty, its bytes taken back from the sensor.
            managers.fetch.unrecord(user, client, size, now)
        throttled = getattr(module, "throttled_response", None)
        if throttled is not None:
            return throttle_ms, throttled(ctx, request, throttle_ms)
        if isinstance(response, RawBody):
            patch = getattr(module, "with_throttle_time", None)
            if patch is not None:
                response = patch(ctx, response, throttle_ms)
        elif response is not None and hasattr(response, "throttle_time"):
            response = dataclasses.replace(
                response, throttle_time=timedelta(milliseconds=throttle_ms)
            )
        return throttle_ms, response

    @staticmethod
    def _encode(ctx: RequestContext, response: Any) -> bytes | list[bytes | memoryview]:
        if isinstance(response, RawBody):
            header = codec.encode_response_header(
                ctx.correlation_id, codec.response_header_version(ctx.api_key, ctx.api_version)
            )
            chunks = response.chunks
            if len(chunks) == 1 and type(chunks[0]) is bytes and len(chunks[0]) <= 65536:
                # a small answer (Produce): one bytes object, one plain write
                return codec.frame_size(len(header) + len(chunks[0])) + header + chunks[0]
            size = len(header) + sum(len(c) for c in chunks)
            return [codec.frame_size(size) + header, *chunks]
        return codec.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)

    def _error_answer(self, ctx: RequestContext, request: Any) -> Answer:
        """UNKNOWN_SERVER_ERROR in the shape the API allows, else close the connection."""
        code = ErrorCode.unknown_server_error
        try:
            module = self._modules.get(ctx.api_key)
            shaper = getattr(module, "error_response", None)
            response = shaper(ctx, request, code) if shaper is not None else None
            if response is None:
                schema = codec.response_schema(ctx.api_key, ctx.api_version)
                response = top_level_error_response(schema, code)
            if response is None:
                return Close("handler failed and the response has no error field")
            return self._encode(ctx, response)
        except Exception:
            log.exception("building the error answer failed; closing the connection")
            return Close("handler failed")


def _waits_for_start(ready: frozenset[int], api_key: int, frame: bytes | memoryview) -> bool:
    """While the coordinators load: whether a request must wait for them. The APIs ``ready``
    need none unless transactional (the transaction coordinator's): an InitProducerId with a
    transactional id, a Produce with one or with a transactional batch. Runs only while the
    broker starts (a decode more for those two APIs then)."""
    if api_key not in ready:
        return True
    if api_key != INIT_PRODUCER_ID_KEY and api_key != PRODUCE_KEY:
        return False
    from tidelog.broker.txn.add_partitions_to_txn_manager import transactional_producer

    try:
        api_version = codec.peek_request_header(frame)[1]
        offset = codec.decode_request_header(frame)[1]
        request = codec.decode_request(frame, api_key, api_version, offset)
    except FrameDecodeError:
        return False  # answered (refused) as it would be after the start
    if getattr(request, "transactional_id", None) is not None:  # Produce v0-2 have none
        return True
    if api_key == INIT_PRODUCER_ID_KEY:
        return False
    return any(
        transactional_producer(p.records) is not None
        for topic in request.topic_data
        for p in topic.partition_data
    )


# ---------------------------------------------------------------------- a request's handler time


class _Timed:
    __slots__ = ("coro", "spent")

    def __init__(self, coro: Any, spent: list[float]) -> None:
        self.coro = coro
        self.spent = spent

    def __await__(self) -> Generator[Any, Any, Any]:
        return _step_timed(self.coro, self.spent)


def _step_timed(coro: Any, spent: list[float]) -> Generator[Any, Any, Any]:
    """Drive ``coro`` as ``yield from`` would, adding the time of each of its steps (not the
    time it waited between them) to ``spent[0]``."""
    clock = time.perf_counter
    sent: Any = None
    error: BaseException | None = None
    while True:
        started = clock()
        try:
            waiting_on = coro.send(sent) if error is None else coro.throw(error)
        except StopIteration as done:
            spent[0] += clock() - started
            return done.value
        except BaseException:
            spent[0] += clock() - started
            raise
        spent[0] += clock() - started
        try:
            sent, error = (yield waiting_on), None
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            sent, error = None, exc


def timed(coro: Any, spent: list[float]) -> Any:
    """An awaitable of ``coro``'s result that adds the time ``coro`` ran (its steps on the loop,
    not its waits) to ``spent[0]``: a request's handler time for the request quota."""
    return _Timed(coro, spent)
