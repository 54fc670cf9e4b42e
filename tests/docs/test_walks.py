"""The walks of docs/architecture.md are true: every hop names a function that exists, and each
hop's function reaches the next one.

A walk is a section ``## Walk: <title>`` holding a numbered list; each item names one hop as
``path/to/file.py`` ``function`` (or ``Class.method``), then prose. The checker reads the named
file with ``ast`` (nothing is imported), finds the function and checks the link to the hop
after it: the next hop's function name (its last dotted part) appears in this hop's body as a
called or referenced name or attribute. A hop reached some other way says so with
``(via `name`)`` in its own line: then ``name`` must appear in the previous hop's body instead
(a table look-up such as ``API_TABLE``, a callback registered under another name). A hop
reached after an earlier call returned says ``(from step N)``: the link is checked from step N
(the caller the walk returns to) instead of the step before it. A hop marked ``(a new
request)`` starts the next request of the walk (its handler, reached through the API table):
nothing is linked to it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache

import pytest

from tests.docs.examples import DOCS, ROOT

PAGE = DOCS / "architecture.md"
HOP = re.compile(r"^\d+\.\s+`(?P<file>[\w/]+\.py)`\s+`(?P<func>[\w.]+)`(?P<rest>.*)$")
VIA = re.compile(r"\(via `([\w.]+)`\)")
FROM = re.compile(r"\(from step (\d+)\)")


@dataclass(frozen=True, slots=True)
class Hop:
    line: int
    file: str
    func: str
    via: str | None
    step: int
    caller: int | None
    new_request: bool

    @property
    def short(self) -> str:
        return self.func.rsplit(".", 1)[-1]


def walks() -> dict[str, list[Hop]]:
    out: dict[str, list[Hop]] = {}
    current: list[Hop] | None = None
    for number, line in enumerate(PAGE.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            current = None
            if line.startswith("## Walk: "):
                current = out.setdefault(line[len("## Walk: ") :].strip(), [])
            continue
        if current is None:
            continue
        match = HOP.match(line.strip())
        if match:
            via = VIA.search(match["rest"])
            caller = FROM.search(match["rest"])
            current.append(
                Hop(
                    number,
                    match["file"],
                    match["func"],
                    via[1] if via else None,
                    int(line.strip().split(".", 1)[0]),
                    int(caller[1]) if caller else None,
                    "(a new request)" in match["rest"],
                )
            )
    return out


@cache
def _tree(file: str) -> ast.Module:
    return ast.parse((ROOT / file).read_text(encoding="utf-8"), filename=file)


def _find(file: str, func: str) -> ast.AST | None:
    scope: list[ast.stmt] = _tree(file).body
    node: ast.AST | None = None
    for part in func.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        scope = node.body  # type: ignore[attr-defined]
    return node


def _names_in(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
    return names


WALKS = walks()


def test_the_page_has_the_three_walks() -> None:
    titles = " / ".join(WALKS)
    assert len(WALKS) >= 3, f"docs/architecture.md has walks: {titles}"
    for word in ("Produce", "Fetch", "TxnOffsetCommit"):
        assert any(word in title for title in WALKS), f"no walk for {word}: {titles}"
    for title, hops in WALKS.items():
        assert len(hops) >= 5, f"walk {title!r} has {len(hops)} hops"


@pytest.mark.parametrize("title", sorted(WALKS))
def test_every_hop_exists_and_reaches_the_next(title: str) -> None:
    hops = WALKS[title]
    problems: list[str] = []
    nodes: list[ast.AST | None] = []
    for hop in hops:
        if not (ROOT / hop.file).is_file():
            problems.append(f"line {hop.line}: no file {hop.file}")
            nodes.append(None)
            continue
        node = _find(hop.file, hop.func)
        if node is None:
            problems.append(f"line {hop.line}: {hop.file} defines no {hop.func}")
        nodes.append(node)
    by_step = {hop.step: (hop, node) for hop, node in zip(hops, nodes, strict=True)}
    for index, after in enumerate(hops[1:], 1):
        if after.new_request:
            continue
        if after.caller is not None:
            if after.caller not in by_step:
                problems.append(f"line {after.line}: no step {after.caller} to come from")
                continue
            before, node = by_step[after.caller]
        else:
            before, node = hops[index - 1], nodes[index - 1]
        if node is None:
            continue
        wanted = after.via or after.short
        if wanted not in _names_in(node):
            problems.append(
                f"line {before.line}: {before.file} {before.func} does not reach {wanted} "
                f"(the next hop, line {after.line})"
            )
    assert not problems, f"walk {title!r} in docs/architecture.md:\n" + "\n".join(problems)
