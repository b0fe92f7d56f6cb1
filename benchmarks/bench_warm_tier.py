"""Does the prompt aiden builds keep more of what matters than a naive window of the same size? (#38)

LoCoMo (``$AIDEN_REAL_DATA/locomo``; skipped, saying why, when absent): each
long conversation is fed turn by turn into ``open_memory(root,
context_window=W)`` as a real chat loop would: the first speaker's turns are
user inputs, the second speaker's turns are the assistant's replies, each
session opens with a system event giving its date. Before each reply the loop
calls ``build_messages``; after it, in the *usage* mode, it reports the
prompt's size (counted by tiktoken o200k, as a provider would) with
``record_usage``; in the *no usage* mode it reports only the end of the run.
At the end (after the maintenance pass the last turn asked for) ``build_messages()``
gives the final prompt.

A question (categories 1-4; 5 is unanswerable) counts when its gold answer is
in the prompt's text: normalized (case, punctuation, spacing), the whole
answer as a phrase, or for a multi-word answer at least 80% of its content
words within 300 characters.

Baselines in the same run get exactly the final prompt's o200k tokens, with the
same system text and message framing: the most recent raw turns (sliding
window), and 25% of the tokens from the conversation's head plus 75% from its
tail. Also shown: the summary layer alone, summary.md whole (what the fit may
cut) and the whole conversation (the ceiling), per category, and the share of
the final prompt each tier takes (rolling summary, recent chunks, hot window).

Coding-agent checks (#38): on the generated demo scenario and on the real
SWE-agent sessions (``$AIDEN_REAL_DATA/swe-agent``), the chunk summaries that
say nothing but a file list (or nothing), and list entries of the summary
layer that are junk: a bare path, a test-runner line, a path cut mid-word, a
phatic line.

    python benchmarks/bench_warm_tier.py [--windows 8000,32000] [--conversations N] [--modes usage,none]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _common import table, write_result  # noqa: E402

import aiden  # noqa: E402
from aiden import Config, PromptLayers, SessionEvent  # noqa: E402

Message = dict[str, Any]
Count = Callable[[str], int]

LAYERS = PromptLayers(base_instruction="You are a helpful assistant in a long-running conversation.")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_STOP = frozenset(
    ["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "by", "from", "is", "are", "was", "were", "be", "been", "her", "his", "their", "its", "my", "our", "your", "she", "he", "they", "it", "i", "you", "we", "me", "him", "them", "that", "this", "these", "those", "as", "about", "into"]
)
_SPAN = 300
_SHARE = 0.8


# --- tokens ------------------------------------------------------------------------------------


def o200k() -> Count:
    """tiktoken o200k_base from litellm's bundled encodings (offline)."""
    import litellm

    bundled = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    return lambda text: len(enc.encode(text, disallowed_special=()))


def messages_tokens(messages: Sequence[Message], count: Count) -> int:
    """Prompt tokens of chat messages: content, tool calls and 4 tokens of framing each (cookbook rule)."""
    total = 3
    for m in messages:
        total += 4 + count(str(m.get("content") or ""))
        for call in m.get("tool_calls") or []:
            total += count(json.dumps(call))
    return total


# --- answers in a text -------------------------------------------------------------------------


def normalize(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def answer_in(answer: str, text: str) -> bool:
    """The gold answer is in ``text`` (normalized): as a phrase, or >= 80% of its content words within 300 chars."""
    ans = normalize(answer)
    if not ans:
        return False
    if re.search(rf"(?<!\w){re.escape(ans)}(?!\w)", text):
        return True
    words = list(dict.fromkeys(w for w in ans.split() if w not in _STOP))
    if len(words) < 2:
        return False
    need = math.ceil(len(words) * _SHARE)
    hits: list[tuple[int, int]] = []
    for n, w in enumerate(words):
        hits.extend((m.start(), n) for m in re.finditer(rf"(?<!\w){re.escape(w)}(?!\w)", text))
    hits.sort()
    lo = 0
    seen: dict[int, int] = {}
    for pos, n in hits:
        seen[n] = seen.get(n, 0) + 1
        while hits[lo][0] < pos - _SPAN:
            k = hits[lo][1]
            seen[k] -= 1
            if not seen[k]:
                del seen[k]
            lo += 1
        if len(seen) >= need:
            return True
    return False


def prompt_text(messages: Sequence[Message]) -> str:
    return normalize("\n".join(str(m.get("content") or "") for m in messages))


# --- LoCoMo ------------------------------------------------------------------------------------


class Conversation:
    """One LoCoMo conversation as chat turns, with its answerable questions."""

    def __init__(self, path: Path) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        conv = data.get("conversation", data)
        self.name = path.stem
        self.user = conv["speaker_a"]
        self.turns: list[tuple[str, str]] = []  # (kind, text): kind user | assistant | date
        n = 1
        while f"session_{n}" in conv or f"session_{n}_date_time" in conv:
            turns = conv.get(f"session_{n}") or []
            if turns:
                self.turns.append(("date", f"Session {n} began at {conv.get(f'session_{n}_date_time', '')}."))
            for t in turns:
                text = str(t.get("text") or "")
                if t.get("blip_caption"):
                    text += f" [shares an image: {t['blip_caption']}]"
                kind = "user" if t["speaker"] == self.user else "assistant"
                self.turns.append((kind, f"{t['speaker']}: {text}"))
            n += 1
        self.questions = [
            (str(q["answer"]), int(q["category"]))
            for q in data.get("qa") or []
            if int(q.get("category", 5)) in CATEGORIES and "answer" in q
        ]


def conversations(limit: int) -> list[Conversation] | str:
    base = os.environ.get("AIDEN_REAL_DATA")
    if not base:
        return "AIDEN_REAL_DATA is not set"
    folder = Path(base) / "locomo"
    files = sorted(folder.glob("*.json"))
    if not files:
        return f"no LoCoMo conversations in {folder}"
    convs = [Conversation(p) for p in files[:limit]]
    unasked = [c.name for c in convs if not c.questions]
    if unasked:
        print(f"(LoCoMo conversations without answerable questions skipped: {len(unasked)} of {len(convs)}:"
              f" {', '.join(unasked)})", flush=True)
    return [c for c in convs if c.questions] or "no LoCoMo conversation has an answerable question (category 1-4)"


def _event(kind: str, text: str) -> SessionEvent:
    if kind == "user":
        return SessionEvent(type="user_input", role="user", content=text)
    if kind == "assistant":
        return SessionEvent(type="assistant_output", role="assistant", content=text)
    return SessionEvent(type="system_event", role="system", content=text)


def _raw_message(kind: str, text: str) -> Message:
    return {"role": {"user": "user", "assistant": "assistant"}.get(kind, "system"), "content": text}


def _system() -> list[Message]:
    return [{"role": "system", "content": LAYERS.base_instruction}]


def sliding(conv: Conversation, tokens: int, count: Count) -> list[Message]:
    """The most recent raw turns that fit ``tokens`` (with the same system text)."""
    out = _system()
    used = messages_tokens(out, count)
    tail: list[Message] = []
    for kind, text in reversed(conv.turns):
        m = _raw_message(kind, text)
        cost = 4 + count(text)
        if used + cost > tokens:
            break
        tail.append(m)
        used += cost
    return [*out, *reversed(tail)]


def head_tail(conv: Conversation, tokens: int, count: Count) -> list[Message]:
    """25% of ``tokens`` from the conversation's head, 75% from its tail."""
    out = _system()
    room = tokens - messages_tokens(out, count)
    head: list[Message] = []
    used = 0
    first_tail = len(conv.turns)
    for i, (kind, text) in enumerate(conv.turns):
        cost = 4 + count(text)
        if used + cost > room // 4:
            break
        head.append(_raw_message(kind, text))
        used += cost
        first_tail = i + 1
    tail: list[Message] = []
    for kind, text in reversed(conv.turns[first_tail:]):
        cost = 4 + count(text)
        if used + cost > room:
            break
        tail.append(_raw_message(kind, text))
        used += cost
    return [*out, *head, *reversed(tail)]


def tier_shares(messages: Sequence[Message], count: Count) -> dict[str, int]:
    """Tokens of each tier of an aiden prompt: system layers, rolling summary, recent chunks, hot window."""
    system = str(messages[0].get("content") or "") if messages and messages[0]["role"] == "system" else ""
    rest = messages[1:] if system else messages
    head, _, summary = system.partition("# Session History")
    rolling, _, recent = summary.partition("## Recent Chunks")
    return {
        "layers": count(head),
        "rolling": count(rolling),
        "recent_chunks": count(recent),
        "hot_window": messages_tokens(rest, count) - 3,
    }


async def feed(conv: Conversation, window: int, usage: bool, root: Path, count: Count) -> dict[str, Any]:
    """One conversation through aiden; the final prompt and what it holds."""
    prompts: list[int] = []
    t0 = time.perf_counter()
    async with aiden.open_memory(root, config=Config(durability="none"), context_window=window) as memory:
        for kind, text in conv.turns:
            if kind == "assistant":
                built = await memory.build_messages(LAYERS)
                size = messages_tokens(built.messages, count)
                prompts.append(size)
                await memory.append(_event(kind, text))
                if usage:
                    await memory.record_usage(prompt_tokens=size, run_ended=True)
                else:
                    await memory.record_usage(run_ended=True)
                memory.request_maintenance()
            else:
                await memory.append(_event(kind, text))
        await memory.flush()
        # A pass the last turn asked for finishes first (it compacts only if its trigger is due).
        await memory.maintain()
        final = await memory.build_messages(LAYERS)
        summary = await memory.summary_md()
        stats = memory.stats()
    return {
        "messages": final.messages,
        "summary_md": summary,
        "prompts": prompts,
        "compactions": stats.compactions,
        "seconds": time.perf_counter() - t0,
    }


def _hits(questions: Sequence[tuple[str, int]], text: str) -> dict[int, int]:
    out = dict.fromkeys(CATEGORIES, 0)
    for answer, cat in questions:
        out[cat] += answer_in(answer, text)
    return out


async def run_locomo(
    convs: Sequence[Conversation], windows: Sequence[int], modes: Sequence[str], count: Count
) -> list[dict[str, Any]]:
    rows = []
    whole = {c.name: prompt_text([_raw_message(k, t) for k, t in c.turns]) for c in convs}
    for window in windows:
        for mode in modes:
            agg: dict[str, dict[int, int]] = {}
            shares: dict[str, int] = {}
            lost = tokens = usage_size = compactions = 0
            all_prompts: list[int] = []
            seconds = 0.0
            for conv in convs:
                with tempfile.TemporaryDirectory() as tmp:
                    got = await feed(conv, window, mode == "usage", Path(tmp), count)
                final = got["messages"]
                size = messages_tokens(final, count)
                tokens += size
                usage_size += sum(got["prompts"][-20:]) // max(1, len(got["prompts"][-20:]))
                all_prompts.extend(got["prompts"])
                compactions += got["compactions"]
                seconds += got["seconds"]
                for k, v in tier_shares(final, count).items():
                    shares[k] = shares.get(k, 0) + v
                system = str(final[0].get("content") or "")
                layer = system[system.find("# Session History") :] if "# Session History" in system else ""
                texts = {
                    "aiden": prompt_text(final),
                    "sliding": prompt_text(sliding(conv, size, count)),
                    "head_tail": prompt_text(head_tail(conv, size, count)),
                    "summary_layer": normalize(layer),
                    "summary_md": normalize(got["summary_md"]),
                    "whole": whole[conv.name],
                }
                for name, text in texts.items():
                    h = _hits(conv.questions, text)
                    acc = agg.setdefault(name, dict.fromkeys(CATEGORIES, 0))
                    for c in CATEGORIES:
                        acc[c] += h[c]
                lost += sum(
                    answer_in(a, texts["summary_md"]) and not answer_in(a, texts["aiden"]) for a, _ in conv.questions
                )
            total = {c: sum(1 for conv in convs for _, cat in conv.questions if cat == c) for c in CATEGORIES}
            n = sum(total.values())
            row: dict[str, Any] = {
                "window": window, "mode": mode, "conversations": len(convs), "questions": n,
                "final_prompt_tokens_mean": tokens // len(convs),
                "late_prompt_tokens_mean": usage_size // len(convs),
                "prompt_tokens_mean": sum(all_prompts) // max(1, len(all_prompts)),
                "budget": Config(context_window=window).prompt_budget(),
                "compactions": compactions, "seconds": round(seconds, 1),
                "lost_by_fit": lost,
                "share": {k: round(v / max(1, sum(shares.values())), 3) for k, v in shares.items()},
            }
            for name, acc in agg.items():
                row[name] = round(100 * sum(acc.values()) / n, 1)
                row[f"{name}_by_category"] = {CATEGORIES[c]: round(100 * acc[c] / max(1, total[c]), 1) for c in CATEGORIES}
            row["ratio_vs_sliding"] = round(row["aiden"] / row["sliding"], 3) if row["sliding"] else None
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


# --- coding-agent checks -----------------------------------------------------------------------

_PATH = re.compile(r"^[`'\"]?(?:[\w.-]+/)+[\w.-]*[`'\"]?(?::\d+)?$|^[`'\"]?[\w-]+\.(?:py|js|ts|md|txt|json|yaml|yml|toml|cfg|ini|rs|go|c|h)[`'\"]?$")
_RUNNER = re.compile(
    r"^(?:=+|-+)?\s*(?:\d+ (?:passed|failed|errors?)|PASSED|FAILED|ERROR|ok|collected \d+ items?|"
    r"[\w/.-]+::[\w\[\]-]+(?:\s+(?:PASSED|FAILED|ERROR))?|\.+F*\.*\s*\[\s*\d+%\])\b.*$",
    re.IGNORECASE,
)
_PHATIC = re.compile(
    r"^(?:(?:hi|hey|hello|thanks|thank you|thx|ok(?:ay)?|great|cool|sure|bye|see you|good (?:morning|night)|"
    r"can'?t wait|sounds good|no problem|you'?re welcome|nice|awesome|wow)\b[\s\w,'!.]{0,40})[!.?]*$",
    re.IGNORECASE,
)
_LABEL = re.compile(r"^[A-Z][A-Za-z ()]{0,30}:\s*")
_RULE = re.compile(r"^-{3,}$")
_FILES_ONLY = re.compile(r"^(?:files?|files touched|key files)\s*:", re.IGNORECASE)


def list_entries(summary: str) -> Iterator[str]:
    """The list entries of a summary text (bullets, and items of "Label: a, b" lines are not split)."""
    for line in summary.splitlines():
        s = line.strip()
        if s.startswith(("- ", "* ", "• ")) and not s.startswith("- **chunk_"):
            yield s[2:].strip()


def junk_kind(entry: str) -> str | None:
    """Why a list entry is junk (a bare path, a test-runner line, a cut path, a phatic line), else None."""
    body = re.sub(r"^\[[^\]]{1,40}\]\s*", "", entry)  # a "[who/when]" prefix
    body = _LABEL.sub("", body) if not _PATH.match(body) else body
    body = body.strip().strip("`")
    if not body:
        return "empty"
    if _PATH.match(body):
        return "bare path"
    if _RUNNER.match(body):
        return "test-runner line"
    if re.search(r"(?:^|\s)(?:[\w.-]+/)+[\w-]{1,3}$", body) and not re.search(r"\.\w{1,5}$", body):
        return "cut path"
    words = [w for w in re.findall(r"[A-Za-z]{3,}", body.casefold()) if w not in _STOP]
    if _PHATIC.match(body) or len(words) <= 1:
        return "phatic"
    return None


def contentless(summary: str) -> bool:
    """A chunk summary that says nothing but a file list, commands and structure (or nothing)."""
    for line in summary.splitlines():
        s = line.strip().lstrip("-*• ").strip()
        if not s or _RULE.match(s) or _FILES_ONLY.match(s) or _PATH.match(s) or s.startswith("$ "):
            continue
        if _LABEL.match(s) and not _LABEL.sub("", s).strip():
            continue  # a heading with nothing after it ("Commands:", "Turn Context (split turn):")
        return False
    return True


def rendered_chunks(summary: str) -> list[str]:
    """The Recent Chunks entries of summary.md as the prompt shows them (repeated lines pruned)."""
    _, _, recent = summary.partition("## Recent Chunks")
    return [part.partition("\n")[2] for part in re.split(r"^- \*\*chunk_", recent, flags=re.M)[1:]]


def _check(name: str, chunk_summaries: Sequence[str], summary: str) -> dict[str, Any]:
    junk: dict[str, int] = {}
    examples: list[str] = []
    entries = list(list_entries(summary))
    for e in entries:
        kind = junk_kind(e)
        if kind:
            junk[kind] = junk.get(kind, 0) + 1
            if len(examples) < 4:
                examples.append(f"{kind}: {e[:80]}")
    row = {
        "session": name, "chunks": len(chunk_summaries),
        "contentless_chunks": sum(contentless(s) for s in chunk_summaries),
        "contentless_in_summary_md": sum(contentless(s) for s in rendered_chunks(summary)),
        "recent_chunks_in_summary_md": len(rendered_chunks(summary)),
        "list_entries": len(entries), "junk_entries": sum(junk.values()), "junk": junk, "examples": examples,
    }
    print(json.dumps(row), flush=True)
    return row


async def coding_checks(count: Count) -> list[dict[str, Any]]:
    from aiden.demo import run_demo
    from aiden.readonly import load_entries, open_layout

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        demo = await run_demo(tmp, echo=lambda _: None)
        _, entries = load_entries(open_layout(tmp))
        rows.append(_check("demo (aiden.demo, 40 turns)", [e.summary for e in entries], demo.summary_md))
    base = os.environ.get("AIDEN_REAL_DATA")
    if not (base and (Path(base) / "swe-agent").is_dir()):
        print("swe-agent sessions skipped: AIDEN_REAL_DATA/swe-agent is absent", flush=True)
        return rows
    sys.path.insert(0, str(ROOT / "tests" / "governance"))
    from swe_sessions import load_sessions

    for s in load_sessions(Path(base)):
        events = [msgspec_strip(e) for e in s.events]
        # One step per recorded model call: the events it saw.
        bounds = [*s.calls[1:], len(events)]
        steps, start = [], 0
        for b in bounds:
            steps.append(events[start:b])
            start = b
        with tempfile.TemporaryDirectory() as tmp:
            async with aiden.open_memory(tmp, config=Config(durability="none"), context_window=8000) as memory:
                for step in (st for st in steps if st):
                    built = await memory.build_messages(LAYERS)
                    await memory.append_many(step)
                    await memory.record_usage(prompt_tokens=messages_tokens(built.messages, count), run_ended=True)
                    memory.request_maintenance()
                await memory.maintain(manual=True)
                summary = await memory.summary_md()
            _index, entries = load_entries(open_layout(tmp))
        rows.append(_check(f"swe-agent {s.name}", [e.summary for e in entries], summary))
    return rows


def msgspec_strip(e: SessionEvent) -> SessionEvent:
    """A recorded event without its recorded seq (the writer assigns seqs)."""
    import msgspec

    return msgspec.structs.replace(e, seq=None)


# --- report ------------------------------------------------------------------------------------


def report(rows: Sequence[dict[str, Any]], coding: Sequence[dict[str, Any]]) -> str:
    out = []
    if rows:
        out.append(table(
            ["W", "usage", "aiden", "sliding", "head+tail", "summary layer", "summary.md", "whole", "aiden/sliding",
             "lost by fit", "final prompt (o200k)", "budget"],
            [[r["window"], r["mode"], r["aiden"], r["sliding"], r["head_tail"], r["summary_layer"], r["summary_md"],
              r["whole"], r["ratio_vs_sliding"], r["lost_by_fit"], r["final_prompt_tokens_mean"], r["budget"]]
             for r in rows],
        ))
        out.append("")
        out.append(table(
            ["W", "usage", *[f"{c} aiden / sliding" for c in CATEGORIES.values()], "share: rolling / chunks / hot"],
            [[r["window"], r["mode"],
              *[f"{r['aiden_by_category'][c]} / {r['sliding_by_category'][c]}" for c in CATEGORIES.values()],
              f"{r['share']['rolling']:.2f} / {r['share']['recent_chunks']:.2f} / {r['share']['hot_window']:.2f}"]
             for r in rows],
        ))
    for window in sorted({r["window"] for r in rows}):
        by = {r["mode"]: r for r in rows if r["window"] == window}
        if "usage" in by and "none" in by:
            u, n = by["usage"], by["none"]
            out.append(
                f"\nW={window}: prompt without usage / with usage: mean over all calls "
                f"{n['prompt_tokens_mean']:,} / {u['prompt_tokens_mean']:,} = "
                f"{n['prompt_tokens_mean'] / max(1, u['prompt_tokens_mean']):.2f}; final "
                f"{n['final_prompt_tokens_mean']:,} / {u['final_prompt_tokens_mean']:,} = "
                f"{n['final_prompt_tokens_mean'] / max(1, u['final_prompt_tokens_mean']):.2f}"
            )
    if coding:
        out.append("")
        out.append(table(
            ["session", "chunks", "contentless (index)", "contentless in summary.md", "list entries", "junk entries",
             "kinds"],
            [[r["session"], r["chunks"], r["contentless_chunks"],
              f"{r['contentless_in_summary_md']} of {r['recent_chunks_in_summary_md']}", r["list_entries"],
              r["junk_entries"],
              ", ".join(f"{k} {v}" for k, v in r["junk"].items()) or "-"] for r in coding],
        ))
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> None:
    count = o200k()
    convs = conversations(args.conversations)
    rows: list[dict[str, Any]] = []
    if isinstance(convs, str):
        print(f"LoCoMo skipped: {convs}", flush=True)
    elif not args.coding_only:
        windows = [int(w) for w in args.windows.split(",")]
        rows = await run_locomo(convs, windows, args.modes.split(","), count)
    coding = [] if args.locomo_only else await coding_checks(count)
    text = report(rows, coding)
    print(text)
    write_result("warm_tier", {"locomo": rows, "coding": coding, "table": text})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="8000,32000")
    parser.add_argument("--modes", default="usage,none")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--locomo-only", action="store_true")
    parser.add_argument("--coding-only", action="store_true")
    anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
