"""``EmbeddedBroker`` (``tidelog.Broker``): a broker in a background thread of this process.

    import tidelog

    with tidelog.Broker() as broker:            # log_dir=None: a temporary dir, removed on exit
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

The broker runs on its own event loop (uvloop when installed) in a daemon thread, listening on
127.0.0.1 (a free port on the first start, the same port after a restart). It has the interface
of ``tidelog.testing.Broker``: ``stop()`` is the graceful stop; ``kill()`` ends the loop without
any shutdown work (no flush, no checkpoints, connections dropped), so the next ``start()`` or
``restart()`` recovers the log dir as after a crash. For a broker the code under test cannot
crash, use the subprocess ``tidelog.testing.Broker``.

What the broker logs goes to the ``tidelog`` logger as usual and, while it runs, to
``log_file`` too (``log_text()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Self

from tidelog.testing._common import LocalBroker

__all__ = ("EmbeddedBroker",)

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class EmbeddedBroker(LocalBroker):
    """A tidelog broker on its own event loop in a background thread of this process."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
        *,
        port: int = 0,
        keep: bool = False,
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(
            log_dir,
            overrides,
            port=port,
            keep=keep,
            start_timeout_s=start_timeout_s,
            stop_timeout_s=stop_timeout_s,
        )
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Future[str] | None = None
        self._app: Any = None
        self._handler: logging.Handler | None = None

    # ------------------------------------------------------------------ the interface

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def app(self) -> Any:
        """The ``tidelog.broker.app.Broker`` running now (None when stopped)."""
        return self._app

    def start(self) -> Self:
        """Start the broker thread and wait until it listens.

        The cyclic collector is paused until then (as ``tidelog serve`` does, and put back as
        it was): importing the broker code makes ~35,000 long-lived objects and no garbage
        cycles, and each collection on the way would walk them (about 20 young collections,
        5-8 ms of a start).
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._start()
        finally:
            if collecting:
                gc.enable()

    def _start(self) -> Self:
        self._check_startable()
        with _kio_without_hypothesis():
            from tidelog.broker.app import Broker as App
        from tidelog.config import load_broker_config

        self.starts += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        config = load_broker_config(None, self.settings())
        self._attach_log()
        app = App(config)
        ready = threading.Event()
        failure: list[BaseException] = []
        thread = threading.Thread(
            target=self._run,
            args=(app, ready, failure),
            name=f"tidelog-broker-{self.starts}",
            daemon=True,
        )
        self._thread = thread
        thread.start()
        if not ready.wait(self.start_timeout_s):
            raise RuntimeError(f"tidelog did not listen within {self.start_timeout_s}s")
        if failure:
            thread.join(self.stop_timeout_s)
            self._detach_log()
            raise RuntimeError(f"tidelog did not start: {failure[0]}") from failure[0]
        self._app = app
        self.port = app.listeners[0].port
        return self

    def stop(self, timeout_s: float | None = None) -> int | None:
        """Graceful stop: answer what is in flight, flush, checkpoint. Returns 0 (as the exit
        code of a clean ``tidelog serve``), or None if the broker was not running."""
        self._admin.close()  # first: the broker going away is no error of its client
        return self._end("stop", self.stop_timeout_s if timeout_s is None else timeout_s)

    def kill(self) -> None:
        """End the broker with no shutdown work (in-process stand-in for SIGKILL)."""
        self._admin.close()
        self._end("kill", self.stop_timeout_s)

    def __repr__(self) -> str:
        return f"<tidelog.Broker (embedded) {self._state()}>"

    def _released(self) -> None:
        self._detach_log()

    # ------------------------------------------------------------------ the thread

    def _run(self, app: Any, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = _new_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(app, ready, failure))
        except BaseException as exc:  # pragma: no cover - _main reports its own failures
            if not ready.is_set():
                failure.append(exc)
        finally:
            ready.set()
            try:
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
                self._loop = None

    async def _main(self, app: Any, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()
        self._done = done
        # Ready once the listeners answer (as ``tidelog serve`` is): the coordinators and the
        # other handlers go on loading, and requests other than ApiVersions wait for them.
        starting = asyncio.ensure_future(app.start())
        answering = asyncio.ensure_future(app.answering.wait())
        await asyncio.wait((starting, answering), return_when=asyncio.FIRST_COMPLETED)
        answering.cancel()
        if not app.answering.is_set():  # the start failed before the listeners answered
            failure.append(starting.exception() or RuntimeError("the start was cancelled"))
            ready.set()
            await app.stop()
            return
        ready.set()
        try:
            await starting
        except Exception:
            logging.getLogger("tidelog").exception("tidelog did not start (embedded broker)")
            return
        logging.getLogger("tidelog").info("%s", app.listening_line())
        how = await done
        if how == "stop":
            await app.stop()
            logging.getLogger("tidelog").info("stopped (embedded broker)")
        else:
            await _abandon(app)
            logging.getLogger("tidelog").info("killed (embedded broker): no shutdown work")

    def _end(self, how: str, timeout_s: float) -> int | None:
        thread, loop, done = self._thread, self._loop, self._done
        if thread is None or not thread.is_alive() or loop is None or done is None:
            return None

        def finish() -> None:
            if not done.done():
                done.set_result(how)

        loop.call_soon_threadsafe(finish)
        thread.join(timeout_s)
        if thread.is_alive():
            raise RuntimeError(f"the embedded broker did not stop within {timeout_s}s")
        self._app = None
        self._detach_log()
        return 0

    # ------------------------------------------------------------------ its log

    def _attach_log(self) -> None:
        if self._handler is not None:
            return
        handler = logging.FileHandler(self.log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger = logging.getLogger("tidelog")
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        self._handler = handler

    def _detach_log(self) -> None:
        handler, self._handler = self._handler, None
        if handler is not None:
            logging.getLogger("tidelog").removeHandler(handler)
            handler.close()


@contextlib.contextmanager
def _kio_without_hypothesis() -> Iterator[None]:
    """Import kio (the broker code's first import of it) without Hypothesis.

    kio imports ``hypothesis.strategies`` when it is installed, to register strategies for its
    types: ~250 ms of CPU that a broker never uses. When neither is imported yet in
    this process, Hypothesis is hidden while kio loads and shown again at once, so the host can
    still import and use it (only kio's own strategies for its wire types are not registered).
    A process that imported Hypothesis or kio first is left as it is.
    """
    if "kio" in sys.modules or "hypothesis" in sys.modules:
        yield
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if sys.modules.get("hypothesis", 0) is None:
            del sys.modules["hypothesis"]


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


async def _abandon(app: Any) -> None:
    """What SIGKILL leaves: listeners and connections gone, no flush, no checkpoint, no clean
    shutdown marker. What would outlive the loop in this process and touch the log dir or a
    port (the log cleaner's threads, the metrics endpoint) is stopped; the worker pool is left
    to finish what it holds. The log dirs' ``.lock`` is released, as the kernel releases a
    dead process's locks."""
    for server in app.listeners:
        server.stop_accepting()
        for connection in list(server.connections):
            transport = getattr(connection, "_transport", None)
            if transport is not None:
                transport.abort()
    app._executor.shutdown(wait=False, cancel_futures=True)
    await asyncio.get_running_loop().run_in_executor(None, app.log_cleaner.shutdown, 10.0)
    await app.metrics.stop()
    app.log_manager.release_locks()
