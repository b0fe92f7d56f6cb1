"""Rolling-summary folding: which open threads a fold keeps, and the load-bearing lines of a summary."""

from __future__ import annotations

from typing import Final

import msgspec

from aiden.summarizers.extractive.collector import _Collector
from aiden.summarizers.extractive.dedupe import _dedupe
from aiden.summarizers.extractive.items import _R_FAILED, _R_REST, _Item, _line_of
from aiden.summarizers.extractive.noise import command_targets, is_read_only_command
from aiden.summarizers.extractive.summary_text import _extract_summary_text
from aiden.summarizers.mustkeep import normalize

_ROLLING_COMMANDS: Final = 5
"""Commands the Rolling Summary keeps: the newest distinct ones (older ones are in the chunk archive)."""


def summary_must_keep(text: str, *, max_items: int) -> list[str]:
    """The load-bearing lines of a summary text, most important first, at most ``max_items``.

    Constraints, preferences and corrections, decisions, errors (with their
    resolution) and failed approaches, parsed the way a rolling fold parses
    them. Used to check an LLM's fold of the Rolling Summary with
    :func:`~aiden.summarizers.mustkeep.apply_must_keep`.
    """
    if max_items <= 0:
        return []
    collector = _Collector()
    _extract_summary_text(text, collector, fold_lines=True)
    load_bearing = [
        item
        for item in _dedupe(collector.finish()).kept
        if item.rank <= _R_FAILED and item.section not in ("goal", "open", "outcome")
    ]
    load_bearing.sort(key=lambda it: (it.rank, it.order))
    return [_line_of(item) for item in load_bearing[:max_items]]


def _keep_latest_open(items: list[_Item]) -> list[_Item]:
    # Older open threads are superseded by newer ones (seed 001: keep the
    # current state of the plan, drop superseded versions). A superseded user
    # request stays as a low-priority request: it may quote a detail that
    # was not classified anywhere else.
    opens = [it for it in items if it.section == "open"]
    stale = {id(it) for it in opens[:-2]}
    out: list[_Item] = []
    for item in items:
        if id(item) not in stale:
            out.append(item)
        elif item.text.startswith("User: "):
            out.append(msgspec.structs.replace(item, section="requests", text=item.text[6:], rank=_R_REST))
    return out


def _newest_commands(items: list[_Item]) -> list[_Item]:
    """``items`` with the rolling summary's commands cut to the newest few distinct ones (#19).

    A command repeated in every chunk (``$ pytest tests/gateway -q``) is one
    line, at its newest place; a read-only call whose targets are under Files
    (``read_file(path=a.py)``, ``search(pattern=x)``) is none.
    """
    files = {normalize(it.text) for it in items if it.section == "files"}
    latest: dict[str, _Item] = {}
    for item in items:
        if item.section != "commands":
            continue
        if is_read_only_command(item.text) and all(normalize(p) in files for p in command_targets(item.text)):
            continue
        key = normalize(item.text)
        latest.pop(key, None)  # re-inserted: the dict's order is the order of last use
        latest[key] = item
    kept = {id(it) for it in list(latest.values())[-_ROLLING_COMMANDS:]}
    return [it for it in items if it.section != "commands" or id(it) in kept]
