"""Arguments the parser refuses (usage error, exit 2) before a command runs: no traceback, no empty answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiden.cli import main


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["mcp", "--http", "{root}", "--port", "99999"], "aiden mcp: error: argument --port: '99999' is not a TCP port (0 to 65535)"),
        (["mcp", "--http", "{root}", "--port", "-1"], "aiden mcp: error: argument --port: '-1' is not a TCP port (0 to 65535)"),
        (["mcp", "--http", "{root}", "--port", "http"], "aiden mcp: error: argument --port: 'http' is not a TCP port (0 to 65535)"),
        (["history", "{root}", "--limit", "0"], "aiden history: error: argument --limit: '0' is not a positive whole number"),
        (["history", "{root}", "--limit", "-1"], "aiden history: error: argument --limit: '-1' is not a positive whole number"),
        (["compact", "{root}", "--max-passes", "-1"], "aiden compact: error: argument --max-passes: '-1' is not a positive whole number"),
        (["demo", "--root", "{root}", "--turns", "-1"], "aiden demo: error: argument --turns: '-1' is not a positive whole number"),
    ],
)
def test_an_argument_out_of_range_is_a_usage_error(
    root: Path, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([a.replace("{root}", str(root)) for a in argv])
    assert exited.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith(f"usage: aiden {argv[0]} ")
    assert out.err.endswith(f"\n{error}\n")
