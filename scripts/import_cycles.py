"""Strongly connected components (import cycles) among ``tidelog.broker`` modules.

Usage: ``python scripts/import_cycles.py [--no-type-checking] [--package tidelog.broker]``

Prints each cycle (a set of modules that import each other, directly or not) with its size,
largest first, and the total. Imports under ``if TYPE_CHECKING:`` count unless
``--no-type-checking`` is given: for a reader they tie modules together just the same.
"""

from __future__ import annotations

import argparse
import sys

import grimp


def cycles(package: str, *, type_checking: bool) -> list[list[str]]:
    graph = grimp.build_graph(
        package.split(".")[0], exclude_type_checking_imports=not type_checking
    )
    return graph_cycles(graph, package)


def graph_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """The import cycles of ``graph`` among ``package`` and its modules."""
    nodes = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    edges = {
        m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in set(nodes))
        for m in nodes
    }
    # Tarjan's algorithm, iterative.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                scc = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    scc.append(member)
                    if member == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(out, key=len, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="tidelog.broker")
    parser.add_argument("--no-type-checking", action="store_true")
    args = parser.parse_args(argv)
    found = cycles(args.package, type_checking=not args.no_type_checking)
    for scc in found:
        print(f"cycle of {len(scc)} modules:")
        for module in scc:
            print(f"  {module}")
    print(f"{len(found)} cycles, {sum(len(s) for s in found)} modules in them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
