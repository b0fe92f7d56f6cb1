"""Rolling-summary folding: which open threads a fold keeps, and the load-bearing lines of a summary."""

from __future__ import annotations

import msgspec

from aiden.summarizers.extractive.collector import _Collector
from aiden.summarizers.extractive.dedupe import _dedupe
from aiden.summarizers.extractive.items import _R_FAILED, _R_REST, _Item, _line_of
from aiden.summarizers.extractive.summary_text import _extract_summary_text


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
