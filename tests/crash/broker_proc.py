"""``BrokerProcess`` of ``tests/conftest.py``, importable from helpers and ``scripts/chaos``.

Test directories have several ``conftest.py`` files and no packages, so ``import conftest``
names whichever was imported last; this loads the root one under a name of its own. It also
puts ``tests/`` and ``tests/crash/`` on ``sys.path`` for the modules that import it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ("BrokerProcess", "free_port")

TESTS = Path(__file__).resolve().parent.parent
for _path in (TESTS, TESTS / "crash", TESTS.parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def _root_conftest() -> ModuleType:
    name = "tidelog_root_conftest"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, TESTS / "conftest.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


BrokerProcess = _root_conftest().BrokerProcess
free_port = _root_conftest().free_port
