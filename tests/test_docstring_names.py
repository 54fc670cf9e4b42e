"""Every dotted name and file path a product docstring quotes (between double backticks) names
code that exists; and every file path, ``name()`` and ``Class.method`` named in prose (comments
of the product, docs/*.md) does too.

Checked: file paths ending in ``.py`` (from the checkout's root); names rooted at a tidelog
package (``storage.log_segments.LogSegments``, ``broker.group.wire``), at a class or module of the
product (``LogSegment.open``, ``fetch_plan.FetchPlan``), or at a private module-looking name
(``_fetch_scan.scan``) that the quoting file does not define. Other names (Kafka settings such as
``log.dirs``, Kafka's own Java classes, local variables such as ``ctx.broker``) are not checked.
An attribute of a class counts when the class defines it or assigns ``self.<name>``.

In prose (docstrings, ``#`` comments, docs/*.md): a path rooted at a folder of the checkout
(``storage/log.py``, ``broker/handlers/``) must exist, and a backquoted call ``name()`` in the
product's docstrings and comments must name a function or class defined somewhere in the tree
(product, tests or scripts). Backquoted dotted names in comments and docs are checked as above.
"""

from __future__ import annotations

import ast
import builtins
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
#: The checkout's top folders; a prose path rooted at one of them must exist.
_TOP = ("broker", "storage", "protocol", "config", "analytics", "tools", "schema", "tests",
        "scripts", "docs", "docker")  # fmt: skip
_PROSE_PATH = re.compile(
    rf"(?<![\w/.@:-])(?:tidelog/)?((?:{'|'.join(_TOP)})/[\w./-]*[\w/])(?![\w*{{<-])"
)
#: A name in single or double backticks: ``name()``, ``Class.method``, ``module.function()``.
_PROSE_NAME = re.compile(r"(?<!`)``?([A-Za-z_]\w*(?:\.(?:\w+|\*))*)(\(\))?``?(?!`)")


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


#: A ``# comment`` (from a ``#`` after code or at the start of a line, outside a string as far as
#: one line tells: cheaper than tokenizing every file, and a string holding "# " is prose too).
_COMMENT = re.compile(r"""^(?:[^"'#\n]|"[^"\n]*"|'[^'\n]*')*(#.*)$""", re.M)
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.M)


def _comments(text: str) -> list[str]:
    return [m.group(1) for m in _COMMENT.finditer(text)]


def _all_defined() -> set[str]:
    """Every function, method and class name defined in the tree (product, tests, scripts)."""
    names: set[str] = set()
    for folder in (*PACKAGES, "schema", "tests", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(_DEF.findall(path.read_text(encoding="utf-8")))
    return names


def _path_problem(quoted: str, near: Path) -> str | None:
    quoted = quoted.rstrip(".")
    if "..." in quoted:
        return None  # an elided path (``tests/jvm/.../Foo.java``)
    for base in (ROOT, near, ROOT / "docs"):
        if (base / quoted).exists() or (base / f"{quoted}.py").exists():
            return None  # a file, a folder or a module (``broker/dynamic_configs``)
    return "no such file or folder"


#: A Java method name (``getName``, ``LocalLog.collectAbortedTransactions``): Kafka's, not ours.
_JAVA_NAME = re.compile(r"[a-z]+[A-Z]\w*")
#: Kafka's Java names that look like ours (a class of the same name, a one-word method).
_KAFKA_NAMES = frozenset({"LogSegment.recover"})


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
DEFINED = _all_defined()


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
        # At the top or one level in (``if TYPE_CHECKING:``).
        pattern = rf"^(?:    )?{re.escape(attribute)}\s*(?::|=)"
        return re.search(pattern, source, re.M) is not None
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


def _prose_findings(where: Path, text: str, defined: set[str], calls: bool) -> list[str]:
    """Paths, calls (``calls``: ``name()``) and dotted names in ``text`` that name nothing."""
    findings = []
    for match in _PROSE_PATH.finditer(text):
        problem = _path_problem(match.group(1), (ROOT / where).parent)
        if problem is not None:
            findings.append(f"{where}: {match.group(1)}: {problem}")
    for match in _PROSE_NAME.finditer(text):
        name, call = match.group(1), match.group(2)
        if (
            name.startswith("__")
            or name in _KAFKA_NAMES
            or _JAVA_NAME.fullmatch(name.rsplit(".", 1)[-1])
        ):
            problem = None  # a dunder or Kafka's Java name
        elif "." in name:
            problem = None if not calls and _SETTING.fullmatch(name) else _problem(name, defined)
        elif call and calls and name not in DEFINED | defined and not hasattr(builtins, name):
            problem = "no function or class of that name in the tree"
        else:
            problem = None
        if problem is not None:
            findings.append(f"{where}: `{name}{call or ''}`: {problem}")
    return findings


def _findings() -> list[str]:
    findings = []
    for path in _sources():
        where = path.relative_to(ROOT)
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        defined = _defined_names(tree)
        for comment in _comments(text):
            findings += _prose_findings(where, comment, defined, calls=True)
        for doc in _docstrings(tree):
            findings += _prose_findings(where, doc, defined, calls=True)
            for match in _PATH.finditer(doc):
                quoted = match.group(1)
                if not (ROOT / quoted).exists() and not (path.parent / quoted).exists():
                    findings.append(f"{where}: ``{quoted}``: no such file")
            for match in _NAME.finditer(doc):
                problem = _problem(match.group(1), defined)
                if problem is not None:
                    findings.append(f"{where}: ``{match.group(1)}``: {problem}")
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = re.sub(r"\]\([^)]*\)", "]", path.read_text(encoding="utf-8"))  # links: mkdocs
        findings += _prose_findings(path.relative_to(ROOT), text, set(), calls=False)
    return sorted(set(findings))


def test_docstrings_name_code_that_exists() -> None:
    findings = _findings()
    if findings:
        pytest.fail("docstrings quote names that do not exist:\n" + "\n".join(findings))
