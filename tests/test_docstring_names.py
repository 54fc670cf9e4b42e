"""Every dotted name and file path a product docstring quotes (between double backticks) names
code that exists.

Checked: file paths ending in ``.py`` (from the checkout's root); names rooted at a tidelog
package (``storage.log_segments.LogSegments``, ``broker.group.wire``), at a class or module of the
product (``LogSegment.open``, ``fetch_plan.FetchPlan``), or at a private module-looking name
(``_fetch_scan.scan``) that the quoting file does not define. Other names (Kafka settings such as
``log.dirs``, Kafka's own Java classes, local variables such as ``ctx.broker``) are not checked.
An attribute of a class counts when the class defines it or assigns ``self.<name>``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("broker", "storage", "protocol", "config", "analytics", "tools")
_NAME = re.compile(r"``([A-Za-z_]\w*(?:\.(?:\w+|\*))+)(?:\(\))?``")
_PATH = re.compile(r"``([\w./-]+\.py)``")
#: Kafka settings look like dotted names: ``log.cleaner.threads``, ``group.share.*``.
_SETTING = re.compile(r"[a-z0-9]+(?:\.(?:[a-z0-9]+|\*))+")
_FILE_SUFFIXES = frozenset({"py", "json", "properties", "log", "index", "timeindex", "yaml"})


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _docstrings(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append(doc)
    return found


def _index() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Top-level class and function names, and module base names, to their module names."""
    names: dict[str, list[str]] = {}
    modules: dict[str, list[str]] = {}
    for path in _sources():
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = "tidelog." + ".".join(parts)
        modules.setdefault(parts[-1], []).append(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.setdefault(node.name, []).append(module)
    return names, modules


NAMES, MODULES = _index()


def _has(owner: object, attribute: str) -> bool:
    if attribute == "*" or hasattr(owner, attribute):
        return True
    if inspect.isclass(owner):
        for klass in owner.__mro__:
            if attribute in getattr(klass, "__annotations__", {}):
                return True
            try:
                source = inspect.getsource(klass)
            except (OSError, TypeError):
                continue
            if re.search(rf"\bself\.{re.escape(attribute)}\s*(?::|=)", source):
                return True
    if isinstance(owner, ModuleType):
        try:
            source = inspect.getsource(owner)
        except (OSError, TypeError):
            return False
        return re.search(rf"^{re.escape(attribute)}\s*(?::|=)", source, re.M) is not None
    return False


def _walk(owner: object, attributes: list[str]) -> bool:
    for i, attribute in enumerate(attributes):
        if not _has(owner, attribute):
            return False
        if attribute == "*":
            return True
        try:
            owner = getattr(owner, attribute)
        except AttributeError:
            return i == len(attributes) - 1  # an instance attribute, last of the chain
        if isinstance(owner, property) or not (
            inspect.isclass(owner) or isinstance(owner, ModuleType)
        ):
            return True  # a function, a value: what follows is its own business
    return True


def _resolves_from_module(module_name: str, attributes: list[str]) -> bool:
    """``module_name`` (then submodules) and attributes along ``attributes``."""
    try:
        owner: object = importlib.import_module(module_name)
    except ImportError:
        return False
    rest = list(attributes)
    while rest:
        try:
            owner = importlib.import_module(f"{module_name}.{rest[0]}")
        except ImportError:
            break
        module_name = f"{module_name}.{rest.pop(0)}"
    return _walk(owner, rest)


def _problem(name: str, defined_here: set[str]) -> str | None:
    parts = name.split(".")
    if parts[-1] in _FILE_SUFFIXES:
        return None  # a file name (``.py`` paths are checked as paths)
    if parts[0] == "tidelog":
        parts = parts[1:]
    root, rest = parts[0], parts[1:]
    if root in PACKAGES:
        if _resolves_from_module(f"tidelog.{root}", rest):
            return None
        if root == "broker" and _resolves_from_module("tidelog.broker.app", ["Broker", *rest]):
            return None  # an attribute of the broker (``broker.append_queue``)
        if root in defined_here and len(rest) == 1:
            return None  # a local variable of the quoting file (``config.get``)
        return "no such module or attribute"
    if root in NAMES:
        for module in NAMES[root]:
            if _resolves_from_module(module, [root, *rest]):
                return None
        return f"no such attribute of {root} ({', '.join(NAMES[root])})"
    if root in MODULES:
        for module in MODULES[root]:
            if _resolves_from_module(module, rest):
                return None
        if root in defined_here or _SETTING.fullmatch(name):
            return None  # a local variable, or a Kafka setting (``log.dirs``)
        return f"no such attribute of {root} ({', '.join(MODULES[root])})"
    if root.startswith("_") and root not in defined_here:
        return "names nothing the file defines"
    return None


def _defined_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def _findings() -> list[str]:
    findings = []
    for path in _sources():
        where = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = _defined_names(tree)
        for doc in _docstrings(tree):
            for match in _PATH.finditer(doc):
                quoted = match.group(1)
                if not (ROOT / quoted).exists() and not (path.parent / quoted).exists():
                    findings.append(f"{where}: ``{quoted}``: no such file")
            for match in _NAME.finditer(doc):
                problem = _problem(match.group(1), defined)
                if problem is not None:
                    findings.append(f"{where}: ``{match.group(1)}``: {problem}")
    return sorted(set(findings))


def test_docstrings_name_code_that_exists() -> None:
    findings = _findings()
    if findings:
        pytest.fail("docstrings quote names that do not exist:\n" + "\n".join(findings))
