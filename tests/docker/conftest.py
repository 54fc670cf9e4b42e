"""Fixtures of the podman tests: podman itself (or one skip line), the images built from here."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.docker.podman import Podman

BROKER_IMAGE = "localhost/tidelog:test"
REPLAY_IMAGE = "localhost/tidelog-replay:test"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a container engine, ONE skip line says why (the other container tests are
    deselected rather than each repeating it)."""
    mine = [i for i in items if i.get_closest_marker("docker") is not None]
    if not mine:
        return
    why = Podman.unavailable()
    if why is None:
        return
    mine[0].add_marker(pytest.mark.skip(reason=f"{why} ({len(mine)} container tests not run)"))
    config.hook.pytest_deselected(items=mine[1:])
    rest = set(mine[1:])
    items[:] = [i for i in items if i not in rest]


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    why = Podman.unavailable()
    if why is not None:
        pytest.skip(why)
    p = Podman()
    yield p
    p.cleanup()


@pytest.fixture(scope="session")
def broker_image(podman: Podman) -> str:
    seconds = podman.build("broker", BROKER_IMAGE)
    print(f"\nbuilt {BROKER_IMAGE} in {seconds:.0f} s", file=sys.stderr)
    return BROKER_IMAGE


@pytest.fixture(scope="session")
def replay_image(podman: Podman) -> str:
    seconds = podman.build("replay", REPLAY_IMAGE)
    print(f"\nbuilt {REPLAY_IMAGE} in {seconds:.0f} s", file=sys.stderr)
    return REPLAY_IMAGE
