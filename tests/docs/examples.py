"""The docs' example checker: find the fenced blocks of README.md and docs/**/*.md, run them.

Markers (what an author writes):

- a ```` ```console ```` block is a real run: each ``$ `` line is a command (a line ending in
  ``\\`` continues on the next), the lines after it are its output (stdout and stderr, as a
  terminal shows them). The checker runs the commands in order against a broker of its own and
  compares the output;
- a ```` ```python ```` block is executed (``python`` in a subprocess) and must exit 0;
- any other fence (``text``, ``shell``, ``yaml``, ``properties``, ...) is illustrative and not run;
- ``<!-- example: skip REASON -->`` on the line before a ``console`` or ``python`` fence keeps
  it from running (a reason is required: say what covers it instead);
- ``<!-- example: spark -->`` before a ``python`` block runs it like any other, as a test marked
  ``spark`` (it starts PySpark: ``-m "not spark"`` leaves it out; skipped without Java);
- ``<!-- example: file NAME -->`` before a block writes its text to ``NAME`` in the page's
  working directory instead of running it (a later ``console`` block runs it, e.g.
  ``$ pytest -v test_app.py``).

What a run sees: one broker per page, started as ``./scripts/serve`` starts it (``--config
config/broker.yaml``) on a free 127.0.0.1 port with a temporary log dir; one working directory
per page in which ``data`` is that log dir; ``tidelog``, ``pytest`` and ``python`` of this
environment first on ``PATH``. ``127.0.0.1:9092`` in a command or a Python example is replaced
by the broker's address, and the broker's address in the output by ``127.0.0.1:9092``; a page
that names ``127.0.0.1:8081`` gets the broker's Schema Registry on a free port, replaced alike. The
blocks of a page run in page order and may build on each other.

Output comparison (both sides normalised, see ``normalise``): runs of blanks are one space;
epoch-millisecond timestamps, UUIDs, log-line times, durations (``42.1 ms``, ``3.5 s``), pids,
CRCs and dump-log's batch sizes and positions are placeholders (so a page may show real
values); an author may also write the placeholders ``<any>`` (any text in a line), ``<n>`` (a
number), ``<id>`` (one word), and a line ``...`` (any number of lines).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BOOTSTRAP = "127.0.0.1:9092"
#: A page that names this address gets a broker with its Schema Registry on
#: (``schema.registry.listeners``) at a free port, replaced as ``BOOTSTRAP`` is.
REGISTRY = "127.0.0.1:8081"
COMMAND_TIMEOUT_S = 180.0

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
_DIRECTIVE = re.compile(r"^<!--\s*example:\s*(\w+)\s*(.*?)\s*-->$")

__all__ = (
    "BOOTSTRAP",
    "Block",
    "Command",
    "blocks_of",
    "expected_pattern",
    "matches",
    "normalise",
    "pages",
    "parse_console",
)


@dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is the 1-based line of its opening fence."""

    page: Path
    line: int
    lang: str
    body: str
    directive: str = ""  # "skip", "file", "spark" or ""
    argument: str = ""

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        """Run by the checker (a ``file`` block is written, not run)."""
        if self.directive == "skip":
            return False
        return (
            self.directive in ("file", "spark")
            or self.lang == "python"
            or (self.lang == "console" and any(c for c in parse_console(self.body)))
        )


@dataclass(frozen=True)
class Command:
    text: str  # the command, continuation lines joined as bash reads them
    expected: str  # its output as the page shows it ("" for none)
    line: int = 0  # offset of its ``$ `` line within the block


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/ (a new page is picked up by itself)."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        directive = argument = ""
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        d = _DIRECTIVE.match(lines[k].strip()) if k >= 0 else None
        if d is not None:
            directive, argument = d.group(1), d.group(2)
        body = "\n".join(lines[i + 1 : j]) + "\n" if j > i + 1 else ""
        out.append(Block(page, i + 1, lang, body, directive, argument))
        i = j + 1
    return out


def parse_console(body: str) -> list[Command]:
    commands: list[Command] = []
    text: list[str] = []
    output: list[str] = []
    start = 0
    continuing = False
    for n, line in enumerate(body.splitlines()):
        if continuing:
            text.append(line)
            continuing = line.endswith("\\")
        elif line.startswith("$ "):
            if text:
                commands.append(Command("\n".join(text), _joined(output), start))
            text, output, start = [line[2:]], [], n
            continuing = line.endswith("\\")
        elif text:
            output.append(line)
    if text:
        commands.append(Command("\n".join(text), _joined(output), start))
    return commands


def _joined(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<time>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<timestamp>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b"), "<duration>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    (re.compile(r"\bcrc: \d+"), "crc: <n>"),
    # A compressed batch's size (and so the next one's position) moves with its timestamps.
    (re.compile(r"\b(size|position): \d+"), r"\1: <n>"),
    (re.compile(r"[ \t]+"), " "),
)


def normalise(text: str) -> str:
    """What may differ between two runs, replaced by placeholders; blanks collapsed."""
    lines = []
    for line in text.splitlines():
        for pattern, repl in _NORMALISE:
            line = pattern.sub(repl, line)
        lines.append(line.strip())
    while lines and not lines[-1]:
        lines.pop()
    return _joined(lines)


_PLACEHOLDERS = {
    re.escape("<any>"): r"[^\n]*?",
    re.escape("<n>"): r"(?:-?\d+|<n>)",
    re.escape("<id>"): r"\S+",
}


def expected_pattern(expected: str) -> re.Pattern[str]:
    """A regular expression for the normalised output a page shows."""
    parts = []
    for line in normalise(expected).splitlines():
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        escaped = re.escape(line)
        for placeholder, regex in _PLACEHOLDERS.items():
            escaped = escaped.replace(placeholder, regex)
        parts.append(escaped + r"\n")
    return re.compile("".join(parts))


def matches(expected: str, actual: str) -> bool:
    return expected_pattern(expected).fullmatch(normalise(actual)) is not None


@dataclass
class PageRun:
    """The broker and working directory that the blocks of one page share."""

    workdir: Path
    log_dir: Path
    bootstrap: str
    done: set[int] = field(default_factory=set)
    registry: str = ""  # host:port of the page's Schema Registry, when the page uses one

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        env["COLUMNS"] = "100"
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # as scripts/test sets them
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.pop("PYTEST_ADDOPTS", None)
        return env

    def to_broker(self, text: str) -> str:
        if self.registry:
            text = text.replace(REGISTRY, self.registry)
        return text.replace(BOOTSTRAP, self.bootstrap)

    def from_broker(self, text: str) -> str:
        if self.registry:
            text = text.replace(self.registry, REGISTRY)
        text = text.replace(self.bootstrap, BOOTSTRAP)
        text = text.replace(str(self.log_dir), "data")
        return text.replace(str(self.workdir) + "/", "")

    def run_command(self, command: Command) -> str:
        done = subprocess.run(
            ["bash", "-c", self.to_broker(command.text)],
            cwd=self.workdir,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        return self.from_broker(done.stdout.decode("utf-8", errors="replace"))

    def run_python(self, block: Block) -> subprocess.CompletedProcess[str]:
        script = self.workdir / f"example_line_{block.line}.py"
        script.write_text(self.to_broker(block.body), encoding="utf-8")
        return subprocess.run(
            [sys.executable, script.name],
            cwd=self.workdir,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )

    def write_file(self, block: Block) -> None:
        (self.workdir / block.argument).write_text(self.to_broker(block.body), encoding="utf-8")


def runnable_blocks() -> Iterator[Block]:
    for page in pages():
        for block in blocks_of(page):
            if block.runs:
                yield block


def record(block: Block, outputs: list[str]) -> None:
    """Write ``outputs`` (one per command) into the page as the block's output."""
    commands = parse_console(block.body)
    body_lines = block.body.splitlines()
    new: list[str] = []
    for command, output in zip(commands, outputs, strict=True):
        new += body_lines[command.line : command.line + command.text.count("\n") + 1]
        new += output.rstrip("\n").splitlines()
    lines = block.page.read_text(encoding="utf-8").splitlines()
    lines[block.line : block.line + len(body_lines)] = new
    block.page.write_text("\n".join(lines) + "\n", encoding="utf-8")
