"""The README says what the code does: the configuration reference names every key with its
default, the on-disk layout names every file a memory root holds, every Python block runs, and
it speaks the user's language, not the project's."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
from aiden.demo import run_demo
from aiden.testing import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.timeout(300)


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else len(README)]


def _yaml(value: object) -> str:
    """A default as the reference writes it (as in extraction.yaml; ``derived`` when None)."""
    if value is None:
        return "derived"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or '""'
    return repr(value)


def test_the_configuration_reference_names_every_key_with_its_default() -> None:
    section = _section("Configuration reference")
    rows = dict(re.findall(r"^\| `([a-z0-9_]+)` \| `([^`]*)` \|", section, flags=re.MULTILINE))
    defaults = msgspec.structs.asdict(aiden.Config())
    assert rows == {name: _yaml(value) for name, value in defaults.items()}


# --- on disk -------------------------------------------------------------------------------------


def _layout_patterns() -> list[str]:
    """The README's on-disk block as glob patterns relative to ``memory/`` (``<x>`` -> ``*``)."""
    block = _section("On disk").split("```")[1]
    patterns: list[str] = []
    for line in block.splitlines()[2:]:  # after the fence's newline and "<root>/memory/"
        names = re.split(r"\s{2,}", line.strip())[0].split(", ")
        base = names[0].rsplit("/", 1)[0] + "/" if "/" in names[0].rstrip("/") else ""
        for name in names:
            full = name if "/" in name.rstrip("/") or not base else base + name
            patterns.append(re.sub(r"<[^>]+>", "*", full))
    return patterns


def _documented(path: str, patterns: list[str]) -> bool:
    # A pattern ending in "/" is a directory: everything under it ("*" also matches "/").
    return any(fnmatch.fnmatchcase(path, p + "*" if p.endswith("/") else p) for p in patterns)


async def _a_full_root(root: Path) -> None:
    """A root that has used every part: compactions, a saved memory, experience, Dream, rotation."""
    await run_demo(root, turns=24, echo=lambda _line: None)
    async with aiden.open_memory(root) as memory:
        await memory.begin_run("build the acme repo", environment="acme")
        memory.observe("make", "4.3")
        for n, (cmd, code) in enumerate((("make", 2), ("make deps && make", 0))):
            await memory.append_message(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{n}",
                            "type": "function",
                            "function": {"name": "sh", "arguments": json.dumps({"cmd": cmd})},
                        },
                    ],
                }
            )
            await memory.append(
                aiden.SessionEvent(
                    type="tool_result", tool_call_id=f"c{n}", content="ok", meta={"exit_code": code}
                )
            )
        answer = await memory.handle_tool_call(
            "save_memory", {"type": "rule", "title": "pnpm", "content": "Always use pnpm."}
        )
        assert "saved" in json.loads(answer)
        await memory.commit_run("built", outcome="success")
        while (await memory.learn_experience()).pending:
            pass  # the demo's episodes come first
        assert (await memory.dream()).ran
        await memory.begin_run("the next task", new_session=True)
        await memory.recall_session_chunks("pnpm")  # the new session's recall index (the archive keeps none)
        await memory.commit_run("done")
    async with aiden.open_memory(root):
        pass  # the open rebuilds profile.md


def test_the_on_disk_layout_names_every_file(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    anyio.run(_a_full_root, root)
    memory = root / "memory"
    files = sorted(str(p.relative_to(memory)) for p in memory.rglob("*") if p.is_file())
    patterns = _layout_patterns()
    assert [f for f in files if not _documented(f, patterns)] == []
    # And nothing is listed that this root lacks, except what only a crash, a damaged file,
    # a long history, more sessions than session_summaries_keep, an embedder or a PostgreSQL
    # session (its recall cache) would create.
    rare = {
        "recall/*.sqlite3",
        "experience/vectors.msgpack",
        "last_recovery.json",
        "session/events.quarantine",
        "session/chunks/segment-*.jsonl",
        "session/summary_archive.md",
        "long_term/digest.md",
        "long_term/SOUL.md",
    }
    listed = [p for p in patterns if p not in rare]
    # The new session has not compacted yet: the closed one in session_archive/ shows session/'s files.
    alike = [
        [p, "session_archive/*/" + p.removeprefix("session/")] if p.startswith("session/") else [p]
        for p in listed
    ]
    assert [ps[0] for ps in alike if not any(_documented(f, ps) for f in files)] == []


# --- every Python block runs ---------------------------------------------------------------------

PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


def test_the_readme_has_python_blocks() -> None:
    assert len(PYTHON_BLOCKS) >= 4


@pytest.mark.timeout(120)
@pytest.mark.parametrize("number", range(len(PYTHON_BLOCKS)))
def test_every_python_block_of_the_readme_runs(number: int, tmp_path: Path) -> None:
    """Each block as a user runs it: a script of its own in a fresh directory, in a fresh
    interpreter; a block that calls a model reaches the local fake server through the
    provider's environment variables (as a user points it at Ollama or vLLM)."""
    script = tmp_path / "block.py"
    script.write_text(PYTHON_BLOCKS[number])
    with FakeLLMServer(responder=lambda _body: "Python 3.11 or newer.") as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENAI_API_KEY": "sk-local-test",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_BASE": server.base_url,
        }
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110
        )
        calls = len(server.requests)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip()  # every block shows something
    if "litellm.acompletion" in PYTHON_BLOCKS[number]:
        assert calls >= 1  # the model call went to the local server, nowhere else
        assert "Python 3.11 or newer." in done.stdout


# --- no internal vocabulary ----------------------------------------------------------------------

BANNED = (
    r"\bseeds?\b",
    r"design card",
    r"the brief",
    r"departed from",
    r"DESIGN section",
    r"issue #?\d+",
    r"finding \d+",
    r"stop (number|\d+)",
    r"\bhops?\b",
    r"rooms and walls",
    r"\bTODO\b",
)
"""Words of the project's own process that mean nothing to a user (regexes, case-insensitive):
its specification documents ("seed 000"), its planning ("design card", "the brief", "where we
departed from"), its tracker ("issue 37", "finding 11", "stop 4") and its internal metaphors."""


def test_the_readme_speaks_to_users_not_to_the_project() -> None:
    found = {word: re.findall(word, README, flags=re.IGNORECASE) for word in BANNED}
    assert {word: hits for word, hits in found.items() if hits} == {}


def test_the_banned_words_catch_what_they_are_for() -> None:
    old = "See seed 000 and the design card; Where we departed from the brief (issue 37, finding 11)."
    caught = [w for w in BANNED if re.search(w, old, flags=re.IGNORECASE)]
    assert caught == [*BANNED[:4], r"issue #?\d+", r"finding \d+"]
    assert [w for w in BANNED if re.search(w, "a workshop, hopefully: shops", flags=re.IGNORECASE)] == []


def test_every_exported_name_is_documented() -> None:
    """docs/api.md has a row for each name of ``aiden.__all__`` and no other; the README links to it."""
    api = (ROOT / "docs" / "api.md").read_text()
    rows = re.findall(r"^\| `([A-Za-z_]+)` \|", api, flags=re.MULTILINE)
    assert sorted(rows) == sorted(aiden.__all__)
    assert "(docs/api.md)" in README


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings (lower case, punctuation dropped, spaces to dashes)."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_link_of_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken: list[str] = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            checked = file.suffix == ".md" and bool(anchor)
            if not file.exists() or (checked and anchor not in _anchors(file.read_text())):
                broken.append(f"{page.name}: {target}")
    assert broken == []
