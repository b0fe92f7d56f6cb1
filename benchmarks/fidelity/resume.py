"""Resume from summary (seed 004's acceptance test): could a person pick the work up from the summaries alone?

For each session — three generated ones (``aiden.demo``) and, with
``AIDEN_REAL_DATA`` set, the real SWE-agent sessions — the session is driven
through the public API with a small window (the generated ones compact at
least 10 times), then closed with :meth:`Memory.rotate`. What a person
resuming gets is graded: the closed session's ``summary.md`` plus the
``PROJECT MEMORY`` block of the next session's first prompt. The pinned root
input and the hot window are *not* part of it: they are gone after a restart.

A line of ``summary.md`` is not necessarily in the model's context: each
prompt cuts the summary layer to ``summary_layer_percent`` of the window. So
the same checklist is graded a second time, *in prompt*: the summary layer as
the session's last prompt before the rotation carried it, in place of the
whole summary.md (the same PROJECT MEMORY block), so the two grades differ
exactly by what the prompt's cut left out.

The checklist asks what a person needs to resume (seed 001's "almost never
compactable" list): the goal, each decision with its reason, the constraints,
the user's preferences, the error met and its fix, the failed approach, the
identifiers, and the open thread. The questions are phrased unlike the
planted text; an item is graded by its key identifiers and values (not the
question's words) being on one line of a section where a person would look
for it. A key found only in another section counts as *misfiled*, not found.

    python benchmarks/fidelity/resume.py [--llm-fake] [--turns N]

``--llm-fake`` also runs LiteLLMSummarizer against the local fake server (the
plumbing of the LLM path, not a model: its "summaries" echo input lines).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))

from _common import table, write_result  # noqa: E402

import aiden  # noqa: E402
from aiden import Config, SessionEvent  # noqa: E402
from aiden.demo import LAYERS, _prompt_tokens  # noqa: E402
from aiden.summarizers.protocol import Summarizer  # noqa: E402


def _load_fidelity_run() -> Any:
    # run.py is a script, not a package module: load it under a name that cannot clash.
    name = "fidelity_run"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Turn(Protocol):
    """One driven turn (run.py's ``Turn``): the user input, the events after it, the answer."""

    @property
    def user(self) -> str: ...
    @property
    def events(self) -> list[SessionEvent]: ...
    @property
    def assistant(self) -> str: ...


_fidelity = _load_fidelity_run()
FIDELITY_CONFIG: Config = _fidelity.FIDELITY_CONFIG
fake_llm_summarizer = _fidelity.fake_llm_summarizer
real_sessions = _fidelity.real_sessions
scenario_turns = _fidelity.scenario_turns


# Seed 004's default PROJECT MEMORY budget (~800 tokens); at a 6k window the derived one is 300.
RESUME_CONFIG = msgspec.structs.replace(FIDELITY_CONFIG, project_memory_tokens=800)
# The real sessions have 5-13 steps: a tighter window makes them compact as often as they can.
REAL_CONFIG = msgspec.structs.replace(
    RESUME_CONFIG,
    context_window=4000,
    keep_recent_tokens=500,
    hot_window_events=4,
    governance_max_tool_tokens=600,
    summary_max_tokens=600,
)


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """One checklist question: what a person asks, and what must be on one line of an allowed section."""

    name: str
    question: str
    keys: tuple[str, ...]
    sections: tuple[str, ...]
    """Canonical section names (see :func:`sections_of`) where the answer belongs."""
    min_keys: int = 0
    """How many of ``keys`` one line must hold (0: all)."""


class Graded(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    question: str
    found: bool
    misfiled: bool
    where: str


# --- reading what a person gets ---------------------------------------------------------

_MD_HEADINGS = {
    "goal": "goal",
    "outcome": "outcome",
    "current state": "open",
    "constraints": "constraints",
    "preferences": "preferences",
    "decisions": "decisions",
    "errors": "errors",
    "failed approaches": "failed",
    "open thread": "open",
    "files": "files",
    "commands": "commands",
    "facts": "facts",
    "requests": "requests",
    "notes": "notes",
    "tool results": "notes",
    "must keep": "must_keep",
    "turn context (split turn)": "notes",
}
_PM_HEADINGS = {
    "goal (why this project exists)": "pm_goal",
    "user preferences (follow these)": "pm_preferences",
    "failed approaches (do not repeat)": "pm_failed",
    "working recipes": "pm_recipes",
    "project facts": "pm_facts",
    "recent outcomes": "pm_outcome",
}
_HEADING = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ()]{1,40}?):\s*(?P<rest>.*)$")


def norm(text: str) -> str:
    """Case-folded, whitespace-collapsed."""
    return " ".join(text.casefold().split())


def sections_of(summary_md: str, project_memory: str) -> list[tuple[str, str]]:
    """``(section, line)`` for every content line of ``summary.md`` and the PROJECT MEMORY block."""
    out: list[tuple[str, str]] = []
    section = "notes"
    for raw in summary_md.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "---" or re.match(r"^-?\s*\*\*[\w-]+\*\*$", line):
            continue
        body = line[2:] if line.startswith("- ") else line
        match = _HEADING.match(body) if not line.startswith("- ") else None
        if match is not None and match.group("name").casefold() in _MD_HEADINGS:
            section = _MD_HEADINGS[match.group("name").casefold()]
            if match.group("rest").strip():
                out.append((section, match.group("rest").strip()))
            continue
        out.append((section, body))
    section = "pm_intro"
    for raw in project_memory.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.casefold() in _PM_HEADINGS:
            section = _PM_HEADINGS[line.casefold()]
            continue
        out.append((section, line[2:] if line.startswith("- ") else line))
    return out


def grade(items: Sequence[Item], lines: Sequence[tuple[str, str]]) -> list[Graded]:
    """Each item found (its keys on one line of an allowed section), misfiled (only elsewhere) or missing."""
    out: list[Graded] = []
    normed = [(section, norm(line)) for section, line in lines]
    for item in items:
        keys = [norm(k) for k in item.keys]
        need = item.min_keys or len(keys)

        def holds(line: str, keys: list[str] = keys, need: int = need) -> bool:
            return sum(k in line for k in keys) >= need

        hit = next((s for s, line in normed if s in item.sections and holds(line)), None)
        elsewhere = next((s for s, line in normed if s not in item.sections and holds(line)), None)
        out.append(
            Graded(
                name=item.name,
                question=item.question,
                found=hit is not None,
                misfiled=hit is None and elsewhere is not None,
                where=hit or (f"misfiled under {elsewhere}" if elsewhere else "missing"),
            )
        )
    return out


# --- checklists ------------------------------------------------------------------------


def generated_checklist(turns: Sequence[Turn], facts: Sequence[Any]) -> list[Item]:
    """The checklist of one generated session, its keys read from what was planted."""
    by_kind = {f.kind: f.text for f in facts}
    goal = re.match(r"migrate the (\w+) service from (\w+) to", by_kind["goal"])
    assert goal is not None
    module, lib = goal.group(1), goal.group(2)
    day = by_kind["constraint"].rsplit(" ", 1)[-1]
    port = by_kind["identifier"]
    text = " ".join(t.user + " " + t.assistant for t in turns)
    path = re.search(rf"src/{module}/pipeline_\d+\.py", text)
    assert path is not None
    last = re.search(r"step (\d+)", turns[-1].user)
    ticket = re.search(r"PROJ-\d+", text)
    assert ticket is not None
    goal_at = ("goal", "pm_goal", "pm_outcome")
    items = [
        Item(
            name="goal",
            question="What is this whole piece of work for?",
            keys=(module, lib, "async client", "downtime"),
            sections=goal_at,
        ),
        Item(
            name="decision + reason",
            question="How is the cut-over staged, and what motivated that?",
            keys=(f"{module}_async_v2", "rolled back"),
            sections=("decisions", "pm_facts"),
        ),
        Item(
            name="constraints",
            question="What limits the schedule and the interface?",
            keys=(day, "rest api"),
            sections=("constraints", "pm_preferences", "pm_facts"),
        ),
        Item(
            name="preference",
            question="Which JavaScript package tool is allowed?",
            keys=("yarn", "npm"),
            sections=("preferences", "pm_preferences"),
        ),
        Item(
            name="error + fix",
            question="What broke on import and what cured it?",
            keys=("asyncpool", f"{lib}==2.4.1"),
            sections=("errors", "pm_facts", "pm_recipes"),
        ),
        Item(
            name="failed approach",
            question="What must not be attempted again, and why?",
            keys=("monkeypatching", "retry middleware"),
            sections=("failed", "pm_failed"),
        ),
        Item(
            name="identifiers",
            question="Where does staging run, and which file is the entry?",
            keys=(port, path.group(0)),
            sections=("facts", "pm_facts"),
        ),
        Item(
            name="ticket",
            question="Under which tracker reference is this filed?",
            keys=(ticket.group(0),),
            sections=("goal", "facts", "pm_goal", "pm_facts", "pm_outcome"),
        ),
    ]
    if last is not None:
        items.append(
            Item(
                name="open thread",
                question="Where exactly was the work left off?",
                keys=(f"step {last.group(1)}",),
                sections=("open", "pm_outcome"),
            )
        )
    return items


_TITLE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{4,}")
_OPEN = re.compile(r"^(?:open|create)\s+\"?([\w./-]+\.\w+)", re.M)
_EXC = re.compile(r"^\s*(\w+(?:Error|Exception))\b", re.M)


def real_checklist(path: Path) -> list[Item]:
    """The checklist of one real SWE-agent session: the issue, the file fixed, the error met."""
    data = json.loads(path.read_text())
    users = [m["content"] for m in data.get("history") or [] if m.get("role") == "user"]
    task = next((u for u in users if "DEMONSTRATION" not in str(u)), users[0] if users else "")
    task = task if isinstance(task, str) else json.dumps(task)
    lines = [ln.strip() for ln in task.splitlines() if ln.strip()]
    after = next((i for i, ln in enumerate(lines) if ln.startswith("ISSUE:")), None)
    title = (
        lines[after + 1]
        if after is not None and after + 1 < len(lines)
        else next((ln for ln in lines if len(ln) > 30), task[:120])
    )
    words = sorted(dict.fromkeys(w.casefold() for w in _TITLE_WORD.findall(title)), key=len, reverse=True)[:4]
    items = [
        Item(
            name="goal",
            question="Which problem was being solved?",
            keys=tuple(words),
            sections=("goal", "pm_goal", "pm_outcome"),
            min_keys=min(3, len(words)),
        )
    ]
    steps = _fidelity.real_steps(path, data)
    edited = ""
    opened = ""
    for step in steps:
        action = str(step.get("action") or "")
        match = _OPEN.search(action)
        if match is not None:
            opened = match.group(1)
        if action.startswith(("edit", "insert")) and opened:
            edited = opened
    if edited:
        items.append(
            Item(
                name="file fixed",
                question="Which file carries the change?",
                keys=(edited,),
                sections=("files", "facts", "decisions", "pm_facts", "pm_outcome"),
            )
        )
    error = next((m.group(1) for s in steps if (m := _EXC.search(str(s.get("observation") or "")))), "")
    if error:
        items.append(
            Item(
                name="error met",
                question="What went wrong when the bug was reproduced?",
                keys=(error,),
                sections=("errors", "failed", "pm_failed", "pm_facts"),
            )
        )
    return items


# --- driving a session -----------------------------------------------------------------


class Resumed(msgspec.Struct, kw_only=True):
    name: str
    compactions: int
    summary_md: str
    project_memory: str
    graded: list[Graded]
    graded_in_prompt: list[Graded]
    """The checklist against the last prompt's summary layer (not all of summary.md) + PROJECT MEMORY."""
    summary_layer: str
    """The summary layer as the last prompt before the rotation carried it."""
    summary_trimmed: bool
    """That prompt cut the summary layer to its share of the window."""
    cut_items: list[str]
    """Checklist items summary.md answers alone and that prompt's summary layer alone does not."""
    lines: int
    """Content lines a person reads (summary.md + PROJECT MEMORY)."""
    request_copies: int
    """Lines that copy a routine user request ("Continue with ..., step 12"): noise unless collapsed."""
    misfiled_requests: int
    """Request copies filed as goal, decision, error, fact or preference (a request is none of these)."""


def project_memory_of(messages: Sequence[dict[str, object]]) -> str:
    """The PROJECT MEMORY block of a prompt's system text (up to the next blank-line-separated layer)."""
    text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    start = text.find("PROJECT MEMORY")
    return text[start:] if start >= 0 else ""


_SUMMARY_TITLE = "# Session History (compressed chunks)"


def summary_layer_of(messages: Sequence[dict[str, object]]) -> str:
    """The session-summary layer of a prompt: in its first system message, from summary.md's title to PROJECT MEMORY.

    (The split-turn context, a later system message, is the hot window's, not the summary layer's.)
    """
    text = str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""
    start = text.find(_SUMMARY_TITLE)
    if start < 0:
        return ""
    end = text.find("PROJECT MEMORY", start)
    return text[start:end] if end >= 0 else text[start:]


async def drive(
    name: str,
    turns: Sequence[Turn],
    items: Sequence[Item],
    facts_text: Sequence[str],
    summarizer: Summarizer | None,
    config: Config,
) -> Resumed:
    """Drive ``turns``, close the session, open the next prompt; grade ``items`` against what is left."""
    with tempfile.TemporaryDirectory() as root:
        async with aiden.open_memory(
            root, config=config, summarizer=summarizer, context_window=config.context_window
        ) as memory:
            for turn in turns:
                start = await memory.begin_run(turn.user)
                del start
                for event in turn.events:
                    await memory.append(event)
                built = await memory.build_messages(LAYERS)
                await memory.commit_run(turn.assistant, prompt_tokens=_prompt_tokens(built.messages))
                await memory.maintain()
            compactions = memory.stats().compactions
            summary_md = await memory.summary_md()
            last = await memory.build_messages(LAYERS)
            await memory.rotate()
            built = await memory.build_messages(LAYERS)
            block = project_memory_of(built.messages)
    lines = sections_of(summary_md, block)
    layer = summary_layer_of(last.messages)
    copies = request_copies(turns, facts_text, lines)
    return Resumed(
        name=name,
        compactions=compactions,
        summary_md=summary_md,
        project_memory=block,
        graded=grade(items, lines),
        graded_in_prompt=grade(items, sections_of(layer, block)),
        summary_layer=layer,
        summary_trimmed=last.summary_trimmed,
        cut_items=[
            whole.name
            for whole, cut in zip(
                grade(items, sections_of(summary_md, "")), grade(items, sections_of(layer, "")), strict=True
            )
            if whole.found and not cut.found
        ],
        lines=len(lines),
        request_copies=len(copies),
        misfiled_requests=sum(section not in _REQUEST_SECTIONS for section in copies),
    )


_REQUEST_SECTIONS = frozenset({"open", "requests", "pm_outcome", "notes", "commands", "must_keep"})
_LINE_LABEL = re.compile(r"^(?:(?:open|user|plan|goal)\s*:\s*)+", re.IGNORECASE)


def request_copies(
    turns: Sequence[Turn], facts_text: Sequence[str], lines: Sequence[tuple[str, str]]
) -> list[str]:
    """The sections of the lines that copy a routine user request (a turn's input carrying no planted fact)."""
    prefixes = set()
    for turn in turns[1:]:
        text = norm(turn.user)
        if not any(norm(f) in text for f in facts_text):
            prefixes.add(text[:28])
    return [section for section, line in lines if norm(_LINE_LABEL.sub("", line))[:28] in prefixes]


def drive_real(folder: Path, summarizer: Summarizer | None, config: Config | None = None) -> list[Resumed]:
    """Every real SWE-agent session in ``folder`` (``REAL_CONFIG`` unless ``config``), graded."""
    out = []
    for name, session_turns, _facts in real_sessions(folder):
        checklist = real_checklist(folder / f"{name}.traj")
        out.append(anyio.run(drive, name, session_turns, checklist, (), summarizer, config or REAL_CONFIG))
    return out


def run(
    *, llm_fake: bool = False, seeds: Sequence[int] = (1, 2, 3), turns: int = 40, real: bool = True
) -> dict[str, Any]:
    """Every session under the embedded summarizer (and the fake LLM server if ``llm_fake``)."""
    runs: list[tuple[str, Summarizer | None, Any]] = [("extractive (embedded default)", None, None)]
    if llm_fake:
        server, summarizer = fake_llm_summarizer()
        runs.append(("LiteLLMSummarizer via local fake server (plumbing only)", summarizer, server))
    real_dir = os.environ.get("AIDEN_REAL_DATA")
    real_folder = Path(real_dir) / "swe-agent" if real_dir else None
    results: dict[str, Any] = {"runs": {}}
    if real and (real_folder is None or not real_folder.is_dir()):
        results["real_skipped"] = "AIDEN_REAL_DATA is not set (or has no swe-agent/ folder)"
    md: list[str] = []
    for label, summarizer, server in runs:
        sessions: list[Resumed] = []
        for seed in seeds:
            session_turns, facts = scenario_turns(seed, turns)
            checklist = generated_checklist(session_turns, facts)
            planted = [f.text for f in facts]
            sessions.append(
                anyio.run(
                    drive, f"scenario-{seed}", session_turns, checklist, planted, summarizer, RESUME_CONFIG
                )
            )
        if real and real_folder is not None and real_folder.is_dir():
            sessions.extend(drive_real(real_folder, summarizer))
        if server is not None:
            server.close()
        results["runs"][label] = [msgspec.to_builtins(s) for s in sessions]
        md.append(
            f"**{label}** (each cell: summary.md / the last prompt's summary layer)\n\n"
            + report_table(sessions)
        )
    results["table"] = "\n\n".join(md)
    return results


def _verdict(g: Graded) -> str:
    return "yes" if g.found else ("misfiled" if g.misfiled else "no")


def report_table(sessions: Sequence[Resumed]) -> str:
    """Per checklist item: found / misfiled / missing per session, in summary.md and in the last prompt.

    A cell reads ``summary.md verdict / in-prompt verdict``.
    """
    names = list(dict.fromkeys(g.name for s in sessions for g in s.graded))
    headers = ["checklist item", *(f"{s.name} ({s.compactions} comp.)" for s in sessions), "found"]
    rows: list[list[Any]] = []
    for name in names:
        row: list[Any] = [name]
        hits = in_prompt = total = 0
        for s in sessions:
            g = next((g for g in s.graded if g.name == name), None)
            p = next((g for g in s.graded_in_prompt if g.name == name), None)
            if g is None or p is None:
                row.append("-")
                continue
            total += 1
            hits += g.found
            in_prompt += p.found
            row.append(f"{_verdict(g)} / {_verdict(p)}")
        row.append(f"{hits}/{total} / {in_prompt}/{total}")
        rows.append(row)
    all_graded = [g for s in sessions for g in s.graded]
    all_in_prompt = [g for s in sessions for g in s.graded_in_prompt]
    rows.append(
        [
            "**all**",
            *(
                f"{sum(g.found for g in s.graded)}/{len(s.graded)} / "
                f"{sum(g.found for g in s.graded_in_prompt)}/{len(s.graded_in_prompt)}"
                for s in sessions
            ),
            f"{sum(g.found for g in all_graded)}/{len(all_graded)} / "
            f"{sum(g.found for g in all_in_prompt)}/{len(all_in_prompt)}",
        ]
    )
    rows.append(
        [
            "summary layer cut in the last prompt",
            *("yes" if s.summary_trimmed else "no" for s in sessions),
            sum(s.summary_trimmed for s in sessions),
        ]
    )
    rows.append(
        [
            "... items in summary.md that the cut layer lacks (no PROJECT MEMORY)",
            *(", ".join(s.cut_items) or "none" for s in sessions),
            sum(len(s.cut_items) for s in sessions),
        ]
    )
    rows.append(
        [
            "lines read (summary.md + PROJECT MEMORY)",
            *(s.lines for s in sessions),
            sum(s.lines for s in sessions),
        ]
    )
    rows.append(
        [
            "routine-request copies",
            *(s.request_copies for s in sessions),
            sum(s.request_copies for s in sessions),
        ]
    )
    rows.append(
        [
            "... filed as goal/decision/error/fact/preference",
            *(s.misfiled_requests for s in sessions),
            sum(s.misfiled_requests for s in sessions),
        ]
    )
    return table(headers, rows)


def main() -> None:
    """Command line: run, write results/resume.json, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--llm-fake", action="store_true")
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    results = run(llm_fake=args.llm_fake, turns=args.turns)
    path = write_result("resume", results)
    print(results["table"])
    if "real_skipped" in results:
        print(f"\nreal sessions skipped: {results['real_skipped']}")
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
