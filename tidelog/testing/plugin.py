"""The pytest plugin (entry point ``pytest11`` named ``tidelog``): real brokers as fixtures.

Fixtures (all names start with ``tidelog_`` so they never clash with a project's own):

- ``tidelog_broker`` (session): one broker for the whole run, in a subprocess; with
  ``--tidelog-broker=HOST:PORT`` the broker already running there (any Kafka) instead.
- ``tidelog_broker_factory`` (function): ``tidelog_broker_factory(overrides=None)`` starts one more
  broker with its own settings (a dict of Kafka property names) and returns it started; every
  broker it made is stopped at the end of the test.
- ``tidelog_topic`` (function): the name of a fresh, uniquely named topic on ``tidelog_broker``
  (deleted after the test on a ``--tidelog-broker`` broker, unless ``--tidelog-keep``).

Options: ``--tidelog-broker=HOST:PORT``, ``--tidelog-keep`` (keep log dirs, their paths printed
at the end, and the per-test topics on a ``--tidelog-broker`` broker), ``--tidelog-override
KEY=VALUE`` (repeatable; for every broker the plugin starts). When a test fails, what its
brokers logged during the test is attached to its report; the plugin's own admin client is closed
before a broker stops, so its disconnection errors never end up there.

This module imports nothing heavy: the broker code loads when a fixture first needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from tidelog.testing._common import BrokerLike
    from tidelog.testing.process import Broker

__all__ = (
    "pytest_addoption",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
    "tidelog_broker",
    "tidelog_broker_factory",
    "tidelog_topic",
)

#: At most this much of a broker's log goes into a failing test's report (the end of it).
REPORT_LOG_CHARS = 64_000


class _Logged(Protocol):
    def log_text(self) -> str: ...


@dataclass
class _State:
    """Per pytest run: the brokers started, what to keep, where each log stood per test."""

    session_broker: BrokerLike | None = None
    kept: list[str] = field(default_factory=list)
    #: node id -> [(title, broker, log offset at the start of the test)]
    watched: dict[str, list[tuple[str, _Logged, int]]] = field(default_factory=dict)


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tidelog", "tidelog: a real Kafka-protocol broker for tests")
    group.addoption(
        "--tidelog-broker",
        metavar="HOST:PORT",
        default=None,
        help="use the broker already running at HOST:PORT (any Kafka) for tidelog_broker and "
        "tidelog_topic instead of starting one",
    )
    group.addoption(
        "--tidelog-keep",
        action="store_true",
        default=False,
        help="keep the brokers' log dirs (and logs) after the run, for inspection, and the "
        "per-test topics on a --tidelog-broker broker",
    )
    group.addoption(
        "--tidelog-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting (Kafka property name) for every broker the plugin starts; "
        "repeatable",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _State()


def _state(config: pytest.Config) -> _State:
    state = config.stash.get(_STATE, None)
    if state is None:
        state = config.stash[_STATE] = _State()
    return state


def _option_overrides(config: pytest.Config) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in config.getoption("tidelog_override") or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"--tidelog-override wants KEY=VALUE, not {item!r}")
        out[key.strip()] = value
    return out


def _start(config: pytest.Config, overrides: Mapping[str, object] | None) -> Broker:
    from tidelog.testing.process import Broker

    keep = bool(config.getoption("tidelog_keep"))
    settings: dict[str, object] = {**_option_overrides(config), **(overrides or {})}
    broker = Broker(overrides=settings, keep=keep)
    if keep:
        _state(config).kept.append(f"{broker.log_dir} (log: {broker.log_file})")
    try:
        broker.start()
    except BaseException:
        broker.close()
        raise
    return broker


def _stop(broker: BrokerLike) -> str | None:
    """Close a broker the plugin started; a problem at stop is returned, not raised."""
    try:
        code = broker.stop()
    except Exception as exc:
        return f"{broker!r}: {exc}"
    finally:
        close = getattr(broker, "close", None)
        if close is not None:
            close()
    if code not in (0, None):
        return f"{broker!r} exited {code} on SIGTERM:\n{broker.log_text()[-REPORT_LOG_CHARS:]}"
    return None


@pytest.fixture(scope="session")
def tidelog_broker(request: pytest.FixtureRequest) -> Iterator[BrokerLike]:
    """One broker for the test session (``--tidelog-broker`` picks an existing one)."""
    config = request.config
    state = _state(config)
    address = config.getoption("tidelog_broker")
    broker: BrokerLike
    if address:
        from tidelog.testing.external import ExternalBroker

        external = ExternalBroker(address)
        state.session_broker = external
        yield external
        external.close()
        return
    broker = _start(config, None)
    state.session_broker = broker
    yield broker
    state.session_broker = None
    problem = _stop(broker)
    if problem:
        import warnings

        warnings.warn(f"tidelog: the session broker did not stop cleanly: {problem}", stacklevel=1)


BrokerFactory = Callable[..., "Broker"]


@pytest.fixture
def tidelog_broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """``tidelog_broker_factory(overrides=None)`` -> a started broker of its own; all are
    stopped (gracefully) at the end of the test, and one that does not exit 0 fails it."""
    config = request.config
    made: list[Broker] = []
    watched = _state(config).watched.setdefault(request.node.nodeid, [])

    def factory(overrides: Mapping[str, object] | None = None) -> Broker:
        broker = _start(config, overrides)
        made.append(broker)
        watched.append((f"tidelog broker {broker.bootstrap_servers} log", broker, 0))
        return broker

    yield factory
    problems = [p for p in (_stop(b) for b in made) if p]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def tidelog_topic(request: pytest.FixtureRequest, tidelog_broker: BrokerLike) -> Iterator[str]:
    """A fresh topic (one partition) on ``tidelog_broker``, named after the test. On a broker
    given with ``--tidelog-broker`` it is deleted after the test (unless ``--tidelog-keep``):
    the plugin leaves nothing behind on a broker it does not own."""
    from tidelog.testing._common import unique_topic_name
    from tidelog.testing.external import ExternalBroker

    topic = tidelog_broker.create_topic(unique_topic_name(request.node.name))
    yield topic
    if isinstance(tidelog_broker, ExternalBroker) and not request.config.getoption("tidelog_keep"):
        try:
            tidelog_broker.delete_topic(topic)
        except Exception as exc:  # e.g. delete.topic.enable=false there: say so, do not fail
            import warnings

            warnings.warn(
                f"tidelog: could not delete topic {topic!r} from {tidelog_broker!r}: {exc}",
                stacklevel=1,
            )


# --------------------------------------------------------------------------- reports


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    state = _state(item.config)
    if "tidelog_broker" in getattr(item, "fixturenames", ()):
        session = state.session_broker
        # The session broker may start during this setup: its whole log counts then.
        offset = len(session.log_text()) if session is not None else 0
        state.watched.setdefault(item.nodeid, []).append(("", _SessionBroker(state), offset))
    return (yield)


class _SessionBroker:
    """Late-bound reference to the session broker (it may start after the test's setup)."""

    def __init__(self, state: _State) -> None:
        self._state = state

    def log_text(self) -> str:
        broker = self._state.session_broker
        return broker.log_text() if broker is not None else ""

    @property
    def title(self) -> str:
        broker = self._state.session_broker
        where = broker.bootstrap_servers if broker is not None else "?"
        return f"tidelog broker {where} log (session broker, during this test)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    state = _state(item.config)
    watched = state.watched.get(item.nodeid, [])
    if report.failed:
        for title, broker, offset in watched:
            text = broker.log_text()[offset:]
            if not text:
                continue
            name = title or getattr(broker, "title", "tidelog broker log")
            if len(text) > REPORT_LOG_CHARS:
                text = "[... earlier lines left out ...]\n" + text[-REPORT_LOG_CHARS:]
            report.sections.append((name, text))
    if call.when == "teardown":
        state.watched.pop(item.nodeid, None)
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    state = terminalreporter.config.stash.get(_STATE, None)
    if state is not None and state.kept:
        terminalreporter.write_sep("-", "tidelog: log dirs kept (--tidelog-keep)")
        for line in state.kept:
            terminalreporter.write_line(line)
