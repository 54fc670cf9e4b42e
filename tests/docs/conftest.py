"""One broker and one working directory per docs page, shared by the page's blocks in order."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.examples import REGISTRY, ROOT, PageRun
from tests.support.broker_process import BrokerProcess
from tests.support.net import free_port

PageRuns = dict[Path, tuple[PageRun, BrokerProcess]]


@pytest.fixture(scope="session")
def page_runs() -> Iterator[PageRuns]:
    runs: PageRuns = {}
    yield runs
    for page in list(runs):
        finish_page(runs, page)


def page_run(runs: PageRuns, page: Path) -> PageRun:
    """The page's run, started on first use: a broker as ./scripts/serve starts it."""
    if page not in runs:
        workdir = Path(tempfile.mkdtemp(prefix=f"tidelog-docs-{page.stem}-"))
        log_dir = workdir / ".broker" / "data"
        log_dir.mkdir(parents=True)
        registry = ""
        overrides = {}
        if REGISTRY in page.read_text(encoding="utf-8"):
            registry = f"127.0.0.1:{free_port()}"
            overrides["schema.registry.listeners"] = f"http://{registry}"
        broker = BrokerProcess(
            log_dir, overrides, config_path=ROOT / "config" / "broker.yaml"
        ).start()
        (workdir / "data").symlink_to(log_dir)
        runs[page] = (PageRun(workdir, log_dir, broker.bootstrap, registry=registry), broker)
    return runs[page][0]


def finish_page(runs: PageRuns, page: Path) -> None:
    """Stop the page's broker (it must exit 0) and remove its working directory."""
    run, broker = runs.pop(page)
    code = broker.stop() if broker.running else 0
    shutil.rmtree(run.workdir, ignore_errors=True)
    assert code == 0, f"the broker of {page.name} exited {code}:\n{broker.log_text()[-3000:]}"
