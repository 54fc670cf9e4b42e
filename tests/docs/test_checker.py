"""The example checker itself: parsing, placeholders, and that a stale example fails."""

from __future__ import annotations

from pathlib import Path

from tests.docs.examples import ROOT, blocks_of, matches, parse_console


def test_console_blocks_split_into_commands_and_outputs() -> None:
    body = "$ echo a \\\n    b\na b\n$ true\n$ printf 'x\\ny\\n'\nx\ny\n"
    commands = parse_console(body)
    assert [c.text for c in commands] == ["echo a \\\n    b", "true", "printf 'x\\ny\\n'"]
    assert [c.expected for c in commands] == ["a b\n", "", "x\ny\n"]
    assert [c.line for c in commands] == [0, 3, 4]


def test_placeholders_and_normalisation() -> None:
    assert matches("CreateTime:1795503186730\tOffset:0\n", "CreateTime:1800000000001 Offset:0\n")
    assert not matches("Offset:0\n", "Offset:1\n")
    assert matches("in 42.1 ms\n", "in 5.2 ms\n")
    assert matches(
        "TopicId: efbd460b-cf7d-49f2-908e-8a5b532c1f95\n",
        "TopicId: 0a1b2c3d-0000-4000-8000-0123456789ab\n",
    )
    assert matches("member <id> at <any>\n", "member jGSkfVe/a+diA at 127.0.0.1 (1)\n")
    assert matches("head\n...\ntail\n", "head\n1\n2\ntail\n")
    assert matches("head\n...\ntail\n", "head\ntail\n")
    assert not matches("head\n...\ntail\n", "head\n1\n")
    assert matches("a    b\n", "a b\n")
    assert not matches("count <n>\n", "count x\n")


def test_a_stale_example_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```console\n$ echo one\ntwo\n```\n\n<!-- example: skip needs a GPU -->\n"
        "```python\nimport gpu\n```\n\n```text\nnot run\n```\n"
    )
    blocks = blocks_of(page)
    assert [(b.line, b.lang, b.directive, b.runs) for b in blocks] == [
        (3, "console", "", True),
        (9, "python", "skip", False),
        (13, "text", "", False),
    ]
    (command,) = parse_console(blocks[0].body)
    assert not matches(command.expected, "one\n")


def test_fences_are_found_in_the_real_pages() -> None:
    readme = blocks_of(ROOT / "README.md")
    assert any(b.lang == "console" and b.runs for b in readme)
