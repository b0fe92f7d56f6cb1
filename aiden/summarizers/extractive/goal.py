"""The Goal: what task a user message states, for the first line of a history summary.

The root input usually states it in its opening ("Fix the flaky upload test ..."). Three shapes hide it
there, each recognised narrowly (a wrong Goal is worse than a long one): an input that opens with a
demonstration and restates its template for the real task; a paste (log, traceback, code) followed by
what is asked about it ("Why does this fail?"); and a demonstration and the task sent as two messages
before any answer (:func:`demonstrated_goal`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from aiden.summarizers.mustkeep.classify import (
    classify_sentence,
    is_pasted_line,
    is_routine_request,
    substantive,
    written,
)
from aiden.summarizers.mustkeep.text import clip, content_words, join_sentences, split_sentences

__all__ = ["GOAL_CHARS", "demonstrated_goal", "goal_of"]

GOAL_CHARS: Final = 400
"""Most characters of a Goal line."""


_NOT_GOALS: Final = frozenset(
    {"preference", "correction", "question", "failed", "resolution", "error", "decision"}
)


def goal_of(who: str, said: str, prose: Sequence[str]) -> str:
    """The goal a user message of ``who`` (``said``, its substantive sentences ``prose``) states, not yet
    attributed or clipped; empty when they read as a step, an answer, a preference or a question rather
    than the task itself."""
    first = prose[0]
    label = first.split(":", 1)[0].strip().casefold() if ":" in first[:24] else ""
    if label == "goal":
        # "Goal: ..." labels what the summary labels anyway ("Goal: Goal: ..." otherwise).
        prose = [rest, *prose[1:]] if (rest := first.split(":", 1)[1].strip()) else prose[1:]
        if not prose:
            return ""
        first, label = prose[0], ""
    if (
        is_routine_request(first)
        or label in ("constraint", "deadline", "requirement", "decision", "preference", "correction", "note")
        or classify_sentence(first, speaker="user") in _NOT_GOALS
    ):
        return ""
    text = join_sentences(prose)
    if len(text) > GOAL_CHARS:
        if task := _restated_task(written(said)):
            # The opening says what kind of input this is ("Here is a demonstration ..."), the restated
            # template's last instance what is asked.
            text = f"{clip(first, GOAL_CHARS // 3)} … {task}"
        elif not who and (ask := _closing_ask(said, prose)):
            # A paste, then what is asked about it: the opening (what the paste is) in the room the ask leaves,
            # unless that room cuts what the user wrote there ("... Turn these failures into one bug report.").
            room = GOAL_CHARS - len(ask) - 3  # (an unnamed speaker's: nothing said ahead of it)
            opening = text.removesuffix(ask)
            if _fits_own_words(prose, min(len(opening), GOAL_CHARS), room):
                text = f"{clip(opening, room).removesuffix('…')} … {ask}"
    return text


# A log's rule line ("===== test session starts =====", "----- Captured stdout -----"): no words of the user's.
_RULE: Final = re.compile(r"\s*([=*_#~-])\1\1")


def _fits_own_words(prose: Sequence[str], shown: int, room: int) -> bool:
    """Whether every sentence of ``prose`` that starts within its first ``shown`` characters (what the Goal of
    the whole message shows ahead of the ask), bar log and traceback lines, ends within the first ``room``:
    the opening cut to ``room`` then loses nothing the user wrote that the Goal showed before. (A script's own
    question after its log, "Delete these 12 branches?", mostly cuts the user's account of it short: no rule
    tells it from the user's own ask, but this one keeps the Goal it had in the cases seen.)"""
    end = 0
    for sentence in prose:
        start = end + 1 if end else 0
        end = start + len(" ".join(sentence.split()))
        if start >= shown:
            return True
        logged = classify_sentence(sentence, speaker="user") == "error" or _RULE.match(sentence) is not None
        if end > room - 1 and not logged:
            return False
    return True


_ASKS: Final = frozenset({"request", "question"})
# A closing ask about the paste points back at it; a pasted prompt's own question ("Are you sure you want to
# delete 42 files?", "Do you want to perform these actions?", git's "Stage this hunk [y,n,q,a,d,e,s,?]?") is the
# tool's, whatever it points at: a bracketed list of short options ("[y/N]", "(yes/no)", "[y,n,q,?]") says so.
_POINTS_BACK: Final = re.compile(r"\b(?:this|that|these|those|above|here)\b", re.IGNORECASE)
_CHOICE: Final = re.compile(r"[\[(]\s*[\w?]{1,5}(?:\s*[/,|]\s*[\w?]{1,5})+\s*[\])]")
_TOOL_PROMPT: Final = re.compile(r"^\W*(?:do you (?:want|wish)|are you sure|would you like)\b", re.IGNORECASE)


def _closing_ask(said: str, prose: Sequence[str]) -> str:
    """What a long message (``said``, its substantive sentences ``prose``) asks at its end about the output
    pasted above it: its last line that says something, if a short question or request pointing back at what
    is above it, and what is above it is mostly log, traceback, code or command output (a pasted log, then
    "Why does this fail?"); else empty. A pasted email's, spec's or issue's closing question is theirs, and
    after an ask of the message's own ("Please review this: ... Does that make sense?") one is a follow-up."""
    lines = [line for line in said.strip().splitlines() if line.strip()]
    in_code, pasted = False, []
    for line in lines:
        fence = line.lstrip().startswith(("```", "~~~"))
        in_code ^= fence
        pasted.append(
            fence or in_code or is_pasted_line(line) or classify_sentence(line, speaker="user") == "error"
        )
    for at in range(len(lines) - 1, 0, -1):
        if pasted[at]:
            return ""  # the message ends with the paste: nothing asked after it
        if asked := substantive(split_sentences(lines[at])):
            ask = join_sentences(asked)
            # (A pasted log of more sentences than split_sentences returns does not end with the ask.)
            before = prose[: -len(asked)] if list(prose[-len(asked) :]) == asked else prose
            asks_about_paste = (
                2 * sum(pasted[:at]) > at
                and len(ask) <= GOAL_CHARS // 2
                and classify_sentence(asked[-1], speaker="user") in _ASKS
                and _POINTS_BACK.search(asked[-1]) is not None
                and _CHOICE.search(lines[at]) is None
                and _TOOL_PROMPT.search(asked[-1]) is None
            )
            asked_before = any(classify_sentence(s, speaker="user") in _ASKS for s in before)
            return ask if asks_about_paste and not asked_before else ""
    return ""


# A line shorter than this many content words ("ISSUE:", "```", "---") is no template.
_TEMPLATE_WORDS: Final = 3
# A demonstration is a task worked through (the task, then the agent's steps and their output): its prose runs to
# several Goals' worth (SWE-agent's over 7,000 characters), where a forwarded CI alert, a bug report or standup
# notes whose next message repeats one of their lines fit in about one (254 to 384 in the r63 review). Few-shot
# examples shorter than this (a few translations) keep the Goal of the first message, as before these rules.
_DEMONSTRATION_CHARS: Final = 4 * GOAL_CHARS


def _restated_task(content: str) -> str:
    """The prose from the last restatement of a line of ``content``'s opening on; empty if none is
    restated beyond what the goal shows anyway.

    An input that opens with an example or a demonstration of the task restates the example's
    template for the real task after it ("We're solving the following issue: <example> ...
    We're solving the following issue: <the real one>"): the last instance is what is asked.
    """
    starts: dict[str, list[int]] = {}
    offset = 0
    in_code = False
    for line in content.splitlines(keepends=True):
        key = " ".join(line.split()).casefold()
        if key.startswith(("```", "~~~")):
            in_code = not in_code
        elif not in_code and len(content_words(key)) >= _TEMPLATE_WORDS:
            # Prose only: a traceback quoting the title restates no template.
            starts.setdefault(key, []).append(offset)
        offset += len(line)
    restated = [at[-1] for at in starts.values() if at[0] < GOAL_CHARS and at[-1] >= GOAL_CHARS]
    return join_sentences(split_sentences(content[max(restated) :])) if restated else ""


def demonstrated_goal(opening: str, content: str) -> str:
    """The Goal when ``content`` states the task when the message before it (``opening``, no answer between) is a demonstration
    of it: ``content`` opens with a template line that ``opening`` introduces within what its goal shows, after
    an introduction that asks nothing ("Here is a demonstration ... --- DEMONSTRATION --- We're solving the
    following issue: ..."), and is no resend of ``opening``; else empty."""
    if len(join_sentences(substantive(split_sentences(opening)))) < _DEMONSTRATION_CHARS:
        return ""
    lines = opening.splitlines()
    theirs = [" ".join(line.split()).casefold() for line in lines]
    ours = {" ".join(line.split()).casefold() for line in content.splitlines()}
    template = " ".join(content.split("\n", 1)[0].split()).casefold()
    if template not in theirs or len(content_words(template)) < _TEMPLATE_WORDS:
        return ""
    above = "\n".join(lines[: theirs.index(template)])
    intro = substantive(split_sentences(above))
    # A resent or edited first message restates most of its lines; a task after a demonstration few of them.
    kept = [key for key in theirs if len(content_words(key)) >= _TEMPLATE_WORDS]
    resent = 2 * sum(key in ours for key in kept) >= len(kept)
    if resent or not intro or any(classify_sentence(s, speaker="user") in _ASKS for s in intro):
        return ""  # (an introduction that asks something states a task of its own)
    if len(above) >= GOAL_CHARS:
        return ""  # (a template line below what the first message's Goal shows introduces no demonstration)
    # What the first message is, then the task (SWE-agent sends the two before any answer).
    task = join_sentences(split_sentences(content))
    return clip(f"{clip(substantive(split_sentences(opening))[0], GOAL_CHARS // 3)} … {task}", GOAL_CHARS)
