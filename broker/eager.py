"""A handler's coroutine run eagerly: stepped at once up to its first suspension, the rest in a
task (what ``KafkaConnection._submit`` does with every handler's outcome).

Most requests never suspend (a produce with acks 0/1, a fetch with data ready, metadata...):
their answer is written without a task or a loop turn. ``finish`` wraps a coroutine that did
suspend, on what it yielded, so ``asyncio.ensure_future`` can run the rest; ``Ready`` holds an
answer that needed no task, queued behind earlier ones (answers go out in request order).

Threading: event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any, cast

from tidelog.broker.handlers.base import Answer

__all__ = ("Ready", "finish", "timed")


class Ready:
    """An answer that needs no task (written when its turn comes)."""

    __slots__ = ("answer",)

    def __init__(self, answer: Answer) -> None:
        self.answer = answer


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


async def finish(coro: Any, waiting_on: Any) -> Answer:
    """The rest of a handler that suspended during its eager first step (see ``_submit``)."""
    return await _Resume(coro, waiting_on)


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
