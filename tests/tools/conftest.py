"""Fixtures of the tool tests: ``tidelog`` runs a tool in-process and captures its output."""

from __future__ import annotations

import io
import sys

import pytest

from tests.tools.tools_fixtures import RunTool, ToolRun
from tidelog.cli import main


@pytest.fixture
def tidelog(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> RunTool:
    """``tidelog(*argv, stdin=b"...") -> ToolRun`` (exit code, stdout, stderr)."""

    def run(*argv: str, stdin: bytes = b"") -> ToolRun:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse: usage errors and --help
            code = int(exc.code or 0)
        sys.stdout.flush()
        captured = capsys.readouterr()
        return ToolRun(code, captured.out, captured.err)

    return run
