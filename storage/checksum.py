"""CRC-32C (Castagnoli): the checksum of Kafka's v2 record batches (and of our snapshot files).

``crc32c(data, value=0) -> int`` is the ``crc32c`` package's hardware-accelerated function. Its
package ``__init__`` looks up its own version through ``importlib.metadata`` (~20 ms of broker
start-up, most of it scanning installed distributions), so the extension module is loaded
directly here; anything unexpected falls back to the plain ``import crc32c``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ("crc32c",)


def _extension() -> ModuleType:
    loaded = sys.modules.get("crc32c._crc32c")
    if loaded is not None:
        return loaded
    import importlib.machinery
    import importlib.util
    import os

    spec = importlib.util.find_spec("crc32c")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("crc32c is not installed")
    folder = spec.submodule_search_locations[0]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_crc32c" + suffix)
        if os.path.exists(path):
            loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
            ext_spec = importlib.util.spec_from_file_location("crc32c._crc32c", path, loader=loader)
            if ext_spec is None:
                break
            module = importlib.util.module_from_spec(ext_spec)
            loader.exec_module(module)
            sys.modules["crc32c._crc32c"] = module  # ``import crc32c`` later reuses it
            return module
    raise ImportError("crc32c's extension module was not found")


def _load() -> Callable[..., int]:
    try:
        fn: Callable[..., Any] = _extension().crc32c
    except Exception:
        import crc32c as package

        fn = package.crc32c
    return fn


crc32c: Callable[..., int] = _load()
