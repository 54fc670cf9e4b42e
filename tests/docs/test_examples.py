"""Every example in README.md and docs/ that is marked as a real run is re-run and compared.

How blocks are marked and run: ``tests/docs/examples.py``. A failure shows the command, what the
page says and what the run printed; ``python -m tests.docs.record PAGE`` writes fresh output of
a page's ``console`` blocks into the page (review the diff, put placeholders back).
"""

from __future__ import annotations

import shutil

import pytest

from tests.docs.conftest import PageRuns, finish_page, page_run
from tests.docs.examples import (
    Block,
    PageRun,
    blocks_of,
    matches,
    normalise,
    pages,
    parse_console,
    runnable_blocks,
)

pytestmark = pytest.mark.integration

BLOCKS = list(runnable_blocks())


def run_block(run: PageRun, block: Block) -> list[str]:
    """Run one block; returns the failures (empty when the page is right)."""
    failures: list[str] = []
    if block.directive == "file":
        run.write_file(block)
    elif block.lang == "python" or block.directive == "spark":
        done = run.run_python(block)
        if done.returncode != 0:
            failures.append(f"exit status {done.returncode}\n{done.stdout}{done.stderr}")
    else:
        for command in parse_console(block.body):
            actual = run.run_command(command)
            if not matches(command.expected, actual):
                failures.append(
                    f"$ {command.text}\n--- the page says:\n{command.expected}"
                    f"--- the run printed:\n{actual}"
                    f"--- normalised, the page:\n{normalise(command.expected)}"
                    f"--- normalised, the run:\n{normalise(actual)}"
                )
    run.done.add(block.line)
    return failures


def _param(block: Block) -> object:
    marks = [pytest.mark.spark] if block.directive == "spark" else []
    return pytest.param(block, id=block.name, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_example(block: Block, page_runs: PageRuns) -> None:
    if block.directive == "spark" and shutil.which("java") is None:
        pytest.skip("PySpark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    run = page_run(page_runs, block.page)
    page_blocks = [b for b in blocks_of(block.page) if b.runs]
    for earlier in page_blocks:  # what this block builds on, when run alone (-k)
        if earlier.line >= block.line:
            break
        if earlier.line not in run.done:
            run_block(run, earlier)
    failures = run_block(run, block)
    if block.line == page_blocks[-1].line:
        finish_page(page_runs, block.page)
    assert not failures, f"{block.name} is stale:\n" + "\n".join(failures)


def test_every_page_is_scanned_and_console_python_blocks_are_marked() -> None:
    """A ``console`` or ``python`` block either runs or says why not (``example: skip``)."""
    scanned = pages()
    assert any(p.name == "README.md" for p in scanned)
    problems = []
    for page in scanned:
        for block in blocks_of(page):
            if block.directive == "skip" and not block.argument:
                problems.append(f"{block.name}: `example: skip` needs a reason")
            if block.directive not in ("", "skip", "file", "spark"):
                problems.append(f"{block.name}: unknown directive `example: {block.directive}`")
            if block.lang == "console" and block.directive == "" and not block.runs:
                problems.append(f"{block.name}: a console block without a `$ ` command")
    assert not problems, "\n".join(problems)
