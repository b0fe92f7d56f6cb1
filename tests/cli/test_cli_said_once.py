"""What the command line says: a problem once, an unknown model, a root path that is not UTF-8, what counts as an entry."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _with_entry(root: Path) -> str:
    async def save() -> str:
        async with aiden.open_memory(root) as memory:
            answer = await memory.handle_tool_call("save_memory", {"type": "fact", "title": "t", "content": "c"})
            return str(json.loads(answer)["saved"]["id"])

    return anyio.run(save)


def test_a_problem_met_at_every_read_is_said_and_counted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_entry(tmp_path)
    (tmp_path / "memory/long_term/index.yaml").write_text("entries: [[[\n")
    # The store meets the damaged index at the open and again at the save: one problem.
    code, out, err = _run(
        capsys, "memory", "save", str(tmp_path), "--type", "fact", "--title", "u", "--content", "d"
    )
    assert code == 1
    assert json.loads(out)["saved"]["title"] == "u"
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("aiden memory save: long-term store: index.yaml is not valid safe YAML: ")
    assert lines[0].endswith("; rebuilt the index from memories/")
    assert lines[1] == "aiden memory save: 1 problem(s) said above"


def test_inspect_says_an_unknown_model_and_uses_the_default_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_entry(tmp_path)
    code, out, err = _run(capsys, "inspect", str(tmp_path), "--json", "--model", "gpt-4o-typo")
    assert code == 1
    assert err == "aiden inspect: --model 'gpt-4o-typo' is not in litellm's model map: the default window is used\n"
    layer = json.loads(out)["summary_layer"]
    assert (layer["context_window"], layer["window_from"]) == (aiden.Config().context_window, "the default")


def test_inspect_counts_entry_files_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _with_entry(tmp_path)
    (tmp_path / "memory/long_term/memories/notes.md").mkdir()
    code, out, _err = _run(capsys, "inspect", str(tmp_path), "--json")
    assert (code, json.loads(out)["long_term_entries"]) == (0, 1)


def test_a_root_path_that_is_not_utf8_is_printed_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9")  # as the shell passes a Latin-1 name
    os.mkdir(root)
    _with_entry(Path(root))
    code, out, _err = _run(capsys, "inspect", root)
    assert code == 0
    assert out.splitlines()[0] == f"root: {tmp_path}/caf\\xe9"
    code, out, _err = _run(capsys, "inspect", root, "--json")
    assert code == 0
    out.encode("utf-8")  # valid UTF-8 on stdout: no raw byte
    assert '"root": "' + str(tmp_path) + '/caf\\udce9"' in out
    assert json.loads(out)["root"] == root  # the same path, decoded as Python decodes file names
