"""``BrokerProcess`` of ``tests/conftest.py``, importable from helpers and ``scripts/chaos``
(which puts the repository root on ``sys.path``; pytest does it through pyproject's
``pythonpath``)."""

from __future__ import annotations

from tests.conftest import BrokerProcess, free_port

__all__ = ("BrokerProcess", "free_port")
