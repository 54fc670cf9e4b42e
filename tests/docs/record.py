"""Write fresh output into a page's ``console`` blocks: ``python -m tests.docs.record PAGE``.

Runs the page's runnable blocks in order, exactly as ``tests/docs/test_examples.py`` does, and
replaces each command's output with what it printed (bootstrap address and log dir written as
the page shows them). Review the diff and put placeholders (``<id>``, ``...``) back where a
value is not worth showing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.docs.conftest import PageRuns, finish_page, page_run
from tests.docs.examples import blocks_of, parse_console, record


def record_page(page: Path) -> None:
    runs: PageRuns = {}
    run = page_run(runs, page)
    outputs: list[tuple[int, list[str]]] = []
    try:
        for block in blocks_of(page):
            if not block.runs:
                continue
            if block.directive == "file":
                run.write_file(block)
            elif block.lang == "python" or block.directive == "spark":
                done = run.run_python(block)
                print(f"{block.name}: python exit {done.returncode}", file=sys.stderr)
            else:
                outputs.append(
                    (block.line, [run.run_command(c) for c in parse_console(block.body)])
                )
    finally:
        finish_page(runs, page)
    by_line = {b.line: b for b in blocks_of(page)}
    for line, outs in reversed(outputs):  # bottom up: earlier line numbers stay valid
        record(by_line[line], outs)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        record_page(Path(arg).resolve())
