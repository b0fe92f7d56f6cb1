"""Search: BM25 over single events (and, apart, over chunk summaries) with bounded work, fused
with vector ranks for hybrid recall, and the ranked rows turned into :class:`RecallHit` s.

Every event of a compacted chunk is one FTS5 row, every chunk summary another, scored by BM25 over
the OR of the query's terms; the best events then lend each other score by distance in seqs and
count double in a period the query names (:func:`_in_context`). ``bm25()`` costs per ranked row
and counts every row of a phrase, so only the rarest terms, up to :data:`EXACT_ROWS` rows, are
ranked exactly; a more frequent term adds an estimated BM25 credit to the candidates and its newest
rows. Hybrid recall fuses by score (:func:`min_max_fusion`): reciprocal rank fusion with k=60
nearly flattens the ranks that decide what fits into one answer.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import operator
import re
import sqlite3
from collections.abc import Callable, Sequence, Set
from typing import Any, Final

import msgspec

from aiden.errors import RecallError
from aiden.events import EVENT_TYPES
from aiden.recall.db import ChunkRow, IndexDB
from aiden.recall.query import MAX_TERMS, Term, display_text, or_expression, query_terms, word_terms
from aiden.recall.tool import RecallContext, RecallHit, encode_hits

__all__ = [
    "EXACT_ROWS",
    "HIDDEN_SHARE",
    "IN_PERIOD",
    "META_ROWS",
    "SPREAD",
    "Filters",
    "Scored",
    "assemble",
    "bm25_ranking",
    "matched_words",
    "min_max_fusion",
    "reciprocal_rank_fusion",
    "summary_hit",
]

META_ROWS: Final = 100
"""Ranked candidates per search whose docs rows are read (to filter, deduplicate and split them);
also how many nearest vectors a fusion takes, and how many fused rows it keeps."""
EXACT_ROWS: Final = 1500
"""Rows ranked exactly with ``bm25()`` per search, shared by its rarest terms."""
_CANDIDATES: Final = 20
"""Best candidates looked up by rowid for each frequent term."""
_MAX_FREQUENT: Final = 4
"""Most frequent terms credited per search (the rarest of them)."""
_WINDOW: Final = 100
"""Newest rows of a frequent term (and of all frequent terms together) taken as candidates."""
_MAX_FILTER_VALUES: Final = 32
HIDDEN_SHARE: Final = 0.5
"""Share of its BM25 IDF a word for what a tool result's command does counts for the result (:func:`_add_about`)."""
SPREAD: Final = (0.5, 0.25)
"""Share of an event's BM25 lent to the events one and two seqs away (:func:`_in_context`)."""
_SHARES: Final = tuple(enumerate(SPREAD, start=1))
IN_PERIOD: Final = 2.0
"""Score factor of a row written within a period the query names (:func:`_in_context`)."""
_CONTEXT_ROWS: Final = 10 * META_ROWS
"""Best-scored rows re-scored by their neighbours and the query's dates."""
_TURNS: Final = ("user_input", "assistant_output", "role_output")
"""Event types that are turns of the conversation: the only events joining a search by their neighbours."""


class Scored(msgspec.Struct, frozen=True):
    """A ranked row: an event (``seq`` set) or a chunk summary (``seq is None``)."""

    doc: int
    score: float
    chunk: int
    seq: int | None
    type: str | None
    role: str | None
    ts: float | None


class Filters(msgspec.Struct, frozen=True):
    """Validated search filters as an SQL fragment over ``docs AS d``."""

    sql: str
    params: tuple[Any, ...]
    empty_range: bool
    events_only: bool
    """A type or role filter applies: summaries (which have neither) cannot match."""
    tool_results: bool = True
    """Tool results can match (no type filter leaving them out)."""

    @classmethod
    def build(
        cls,
        types: Sequence[str] | None,
        roles: Sequence[str] | None,
        since: float | None,
        until: float | None,
    ) -> Filters:
        """Validate the filters of one search (:class:`RecallError` for bad values)."""
        clauses: list[str] = []
        params: list[Any] = []
        type_list = _str_list(types, "types")
        for t in type_list:
            if t not in EVENT_TYPES:
                raise RecallError(f"unknown event type {t[:64]!r}; expected one of {sorted(EVENT_TYPES)}")
        role_list = _str_list(roles, "roles")
        for column, values in (("type", type_list), ("role", role_list)):
            if values:
                clauses.append(f"d.{column} IN ({','.join('?' * len(values))})")
                params.extend(values)
        lo = _time(since, "since")
        hi = _time(until, "until")
        for clause, bound in (("d.ts_max >= ?", lo), ("d.ts_min <= ?", hi)):
            if bound is not None:
                clauses.append(clause)
                params.append(bound)
        sql = "".join(f" AND {c}" for c in clauses)
        empty = lo is not None and hi is not None and lo > hi
        tools = not type_list or "tool_result" in type_list
        return cls(sql, tuple(params), empty, bool(type_list or role_list), tools)


def _str_list(values: Sequence[str] | None, name: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise RecallError(f"{name} must be a list of strings, not a single string")
    out = list(values)
    if len(out) > _MAX_FILTER_VALUES:
        raise RecallError(f"{name}: at most {_MAX_FILTER_VALUES} values")
    for v in out:
        if not isinstance(v, str):
            raise RecallError(f"{name} must contain strings, got {type(v).__name__}")
    return sorted(set(out))


def _time(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecallError(f"{name} must be a finite number of Unix seconds")
    return float(value)


def _idf(total: int, rows: float) -> float:
    # FTS5's bm25 IDF, including its clamp for terms in more than half the rows. An
    # estimate may exceed the row count (a small session whose exact budget other terms
    # used up): such a term is in every row, clamped the same way, never a math error.
    rows = min(max(rows, 0.0), float(total))
    value = math.log((total - rows + 0.5) / (rows + 0.5))
    return value if value > 1e-6 else 1e-6


# (doc, score) items ordered by score, ties to the newest row (the latest statement of a
# fact); an itemgetter keeps the key in C: these lists hold thousands of rows.
_rank_key: Final = operator.itemgetter(1, 0)


def _in(n: int) -> str:
    return f"IN ({','.join('?' * n)})"


def _from(filters: Filters) -> str:
    # The docs join is only paid for when a filter needs its columns.
    return "fts AS f JOIN docs AS d ON d.id = f.rowid" if filters.sql else "fts AS f"


def _probe(conn: sqlite3.Connection, term: Term) -> int:
    # Counting stops after EXACT_ROWS + 1 rows: cheap even for a word in every event.
    sql = "SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)"
    return int(conn.execute(sql, (term.phrase, EXACT_ROWS + 1)).fetchone()[0])


def _split_by_rows(conn: sqlite3.Connection, terms: Sequence[Term]) -> tuple[list[Term], list[tuple[Term, int]]]:
    """The terms ranked exactly (rarest first, rows within :data:`EXACT_ROWS`) and the frequent ones
    with their probed row count (exact up to :data:`EXACT_ROWS`, else ``EXACT_ROWS + 1``).

    Of the single words, only the :data:`MAX_TERMS` rarest found are kept (ties: the first typed).
    A phrase of two adjacent words is probed only when one of its words is
    not frequent: FTS5 checks a phrase's positions along the rarer word's
    rows, which for two frequent words is the cost this bound is for.
    """
    counts = {i: _probe(conn, t) for i, t in enumerate(terms) if not t.words}
    by_word = {terms[i].text.casefold(): n for i, n in counts.items()}
    found = sorted((i for i in counts if counts[i]), key=lambda i: counts[i])
    counts = {i: counts[i] for i in found[:MAX_TERMS]}
    for i, t in enumerate(terms):
        if t.words and min(by_word.get(w, 0) for w in t.words) <= EXACT_ROWS:
            counts[i] = _probe(conn, t)
    exact: list[Term] = []
    frequent: list[tuple[Term, int]] = []
    budget = EXACT_ROWS
    for i in sorted(counts, key=lambda i: counts[i]):
        if counts[i] == 0:
            continue
        if counts[i] <= budget:
            exact.append(terms[i])
            budget -= counts[i]
        else:
            frequent.append((terms[i], counts[i]))
    return exact, frequent


def bm25_ranking(
    conn: sqlite3.Connection, terms: Sequence[Term], filters: Filters, *, ndocs: int, top_doc: int
) -> tuple[list[tuple[int, float]], frozenset[int]]:
    """``(doc, score)`` of the best :data:`META_ROWS` rows (events and summaries) for ``terms``, best first,
    and those of them that match no term: events ranked only by their neighbours' score (:func:`_in_context`).
    """
    periods = [t.period for t in terms if t.period is not None]
    terms = word_terms(terms)
    if not terms or ndocs == 0 or filters.empty_range:
        return [], frozenset()
    exact, frequent = _split_by_rows(conn, terms)
    scores: dict[int, float] = {}
    if exact:
        # Every row of the exact terms (at most EXACT_ROWS): ranked by bm25() over their OR.
        scores = dict(
            conn.execute(
                f"SELECT f.rowid, -bm25(fts) FROM {_from(filters)} WHERE fts MATCH ?{filters.sql}",
                (or_expression(exact), *filters.params),
            ).fetchall()
        )
    if frequent:
        _add_frequent(conn, scores, exact, frequent, filters, ndocs=ndocs, top_doc=top_doc)
    if filters.tool_results:
        _add_about(conn, scores, [t for t in terms if not t.words], filters, ndocs=ndocs, top_doc=top_doc)
    scored = _in_context(conn, scores, periods, filters)
    ranked = heapq.nlargest(META_ROWS, ((doc, v) for doc, v in scored.items() if doc in scores), key=_rank_key)
    # The matching rows keep their META_ROWS places: a row ranked by its neighbours alone is an extra,
    # worth reading only above the weakest of them (it can only take a weaker match's place, assemble).
    lent = [(doc, v) for doc, v in scored.items() if doc not in scores and ranked and (v, doc) > _rank_key(ranked[-1])]
    lent = heapq.nlargest(META_ROWS, lent, key=_rank_key)
    return sorted(ranked + lent, key=_rank_key, reverse=True), frozenset(doc for doc, _ in lent)


def _in_context(
    conn: sqlite3.Connection, scores: dict[int, float], periods: Sequence[tuple[float, float]], filters: Filters
) -> dict[int, float]:
    """The best :data:`_CONTEXT_ROWS` scores, raised by their neighbours' and by the query's dates.

    The answer is often the reply to the turn holding the query's words, or the turn before it: each
    event gets its BM25 plus a share (:data:`SPREAD`, by distance in seqs) of the best BM25 at that
    distance on either side; summaries lend and borrow nothing. A turn of the conversation (user or
    assistant message) near one of the best :data:`META_ROWS` matching turns that matches no term itself
    (a reply in other words) joins with its share of the matching turns alone, their :data:`IN_PERIOD`
    included. A matching row written within a period the query names is then multiplied by it.
    """
    top = heapq.nlargest(_CONTEXT_ROWS, scores.items(), key=_rank_key)
    out = dict(top)
    if len(top) < 2 and not periods:
        return out
    sql = f"SELECT id, seq, ts_min, ts_max, type FROM docs WHERE id {_in(len(top))}"
    rows = conn.execute(sql, [d for d, _ in top]).fetchall()
    def dated(lo: float | None, hi: float | None) -> bool:
        return lo is not None and hi is not None and any(lo <= end and start <= hi for start, end in periods)

    # A turn lends a reply matching no term its score within the period: such a reply is not raised
    # by its own date (the turn it answers may be outside the period).
    final = {doc: scores[doc] * (IN_PERIOD if dated(lo, hi) else 1.0) for doc, _, lo, hi, _ in rows}
    # A lent score is at most sum(SPREAD) < 1 of its best lender's: only a turn next to one of the
    # best META_ROWS can outrank the weakest match bm25_ranking keeps.
    seeds = set(heapq.nlargest(META_ROWS, final, key=final.__getitem__))
    best: dict[int, float] = {}
    turns: dict[int, float] = {}
    lenders: set[int] = set()
    for doc, seq, _, _, kind in rows:
        if seq is not None:
            best[seq] = max(best.get(seq, 0.0), scores[doc])
            if kind in _TURNS:
                turns[seq] = max(turns.get(seq, 0.0), final[doc])
                if doc in seeds:
                    lenders.add(seq)
    # Without the speakers' names in the turns, the reply to the matching turn often shares no word with
    # the query. Only a turn next to a turn: a tool call or output beside a matching one is no answer to it.
    near = sorted({seq + side * d for seq in lenders for d, _ in _SHARES for side in (-1, 1)} - best.keys())
    if near:
        sql = (
            f"SELECT d.id, d.seq, d.ts_min, d.ts_max, d.type FROM docs AS d WHERE d.seq {_in(len(near))}"
            f" AND d.type {_in(len(_TURNS))}{filters.sql}"
        )
        extra = conn.execute(sql, (*near, *_TURNS, *filters.params)).fetchall()
        # A row matched beyond the best _CONTEXT_ROWS keeps its own score.
        out.update((doc, scores.get(doc, 0.0)) for doc, *_ in extra)
        rows += extra
    at_seq: dict[int, list[int]] = {}
    boosted: list[int] = []
    for doc, seq, lo, hi, _ in rows:
        if doc in scores and dated(lo, hi):
            boosted.append(doc)
        if seq is not None:
            at_seq.setdefault(seq, []).append(doc)
    for seq, docs in at_seq.items():
        # A top row borrows from every match; a row read as a turn's neighbour only from the turns.
        lending = best if seq in best else turns
        lent = 0.0
        for distance, share in _SHARES:
            # The better side at each distance: a run of equal matches stays a tie (newest first).
            lent += share * max(lending.get(seq - distance, 0.0), lending.get(seq + distance, 0.0))
        if lent:
            for doc in docs:
                out[doc] += lent
    for doc in boosted:
        out[doc] *= IN_PERIOD
    return out


def _add_frequent(
    conn: sqlite3.Connection,
    scores: dict[int, float],
    exact: Sequence[Term],
    counted: Sequence[tuple[Term, int]],
    filters: Filters,
    *,
    ndocs: int,
    top_doc: int,
) -> None:
    """Credit the frequent terms to the exact rows holding them, to their newest rows and to the best candidates."""
    newest_sql = f"SELECT f.rowid FROM {_from(filters)} WHERE fts MATCH ?{filters.sql} ORDER BY f.rowid DESC LIMIT ?"
    weights: dict[str, float] = {}
    holders: dict[str, set[int]] = {}
    for term, count in counted:
        newest = [r[0] for r in conn.execute(newest_sql, (term.phrase, *filters.params, _WINDOW))]
        if count <= EXACT_ROWS:
            # Counted exactly: frequent only because rarer terms used the exact budget up.
            found = float(count)
        else:
            # The newest matches span rowids [oldest, top]: extrapolate their density.
            oldest = newest[-1] if newest else top_doc
            found = max(len(newest) * ndocs / max(top_doc - oldest + 1, 1), EXACT_ROWS + 1.0)
        weights[term.phrase] = _idf(ndocs, found)
        holders[term.phrase] = set(newest)
    # Only the rarest few frequent terms are worth lookups: the others weigh little.
    frequent = sorted((term for term, _ in counted), key=lambda t: -weights[t.phrase])[:_MAX_FREQUENT]
    if len(frequent) > 1:
        # Rows holding the two rarest frequent terms, newest first (FTS5 stops after the limit).
        expr = " AND ".join(t.phrase for t in frequent[:2])
        for (doc,) in conn.execute(newest_sql, (expr, *filters.params, _WINDOW)):
            for term in frequent[:2]:
                holders[term.phrase].add(doc)
    ranked = set(scores)
    if exact:
        # Only exact rows that could still reach the top META_ROWS with every
        # frequent term's weight added are worth crediting (credits only raise scores).
        floor = -math.inf
        if len(scores) > META_ROWS:
            floor = heapq.nlargest(META_ROWS, scores.values())[-1] - sum(weights[t.phrase] for t in frequent)
        contenders = {doc for doc, value in scores.items() if value >= floor}
        # Which of them hold each frequent term: FTS5 walks the rare rows and
        # seeks in the frequent term's (no bm25(): its IDF would count them all).
        rare = or_expression(exact)
        for term in frequent:
            rows = conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (f"({rare}) AND {term.phrase}",))
            holders[term.phrase] |= contenders.intersection(itertools.chain.from_iterable(rows.fetchall()))
    for term in frequent:
        for doc in holders[term.phrase]:
            scores[doc] = scores.get(doc, 0.0) + weights[term.phrase]
    # Rows found only in the windows may hold another frequent term further back: by rowid.
    best = [doc for doc, _ in heapq.nlargest(_CANDIDATES, scores.items(), key=_rank_key) if doc not in ranked]
    for term in frequent:
        known = holders[term.phrase]
        ids = [doc for doc in best if doc not in known]
        if not ids:
            continue
        sql = f"SELECT rowid FROM fts WHERE fts MATCH ? AND rowid {_in(len(ids))}"
        for (doc,) in conn.execute(sql, (term.phrase, *ids)):
            scores[doc] += weights[term.phrase]


def _add_about(
    conn: sqlite3.Connection,
    scores: dict[int, float],
    terms: Sequence[Term],
    filters: Filters,
    *,
    ndocs: int,
    top_doc: int,
) -> None:
    """Credit the words for what a tool result's command does (db.py's ``about`` table) to the rows whose
    text lacks them: the word's newest :data:`_WINDOW` rows and the best :data:`_CANDIDATES` scored rows.

    A hidden word counts :data:`HIDDEN_SHARE` of its BM25 IDF: it stands for what the command did, not
    for what its output says, so a turn holding the asked words stays above an output holding none.
    Bounded like :func:`_add_frequent`: a word like "file" describes most outputs of a coding session.
    """
    seek = "SELECT rowid FROM {0} WHERE {0} MATCH ? AND rowid {1}"
    best = [doc for doc, _ in heapq.nlargest(_CANDIDATES, scores.items(), key=_rank_key)]
    if best:
        # The best rows holding any of the words, looked up once: FTS5 pays a seek per rowid.
        expr = " OR ".join(t.phrase for t in terms)
        best = [doc for (doc,) in conn.execute(seek.format("about", _in(len(best))), (expr, *best))]
    credits: dict[int, float] = {}
    for term in terms:
        sql = "SELECT rowid FROM about WHERE about MATCH ? ORDER BY rowid DESC LIMIT ?"
        newest = [doc for (doc,) in conn.execute(sql, (term.phrase, _WINDOW))]
        if not newest:
            continue
        oldest = newest[-1]
        hidden = set(newest)
        if older := [doc for doc in best if doc < oldest]:
            hidden.update(doc for (doc,) in conn.execute(seek.format("about", _in(len(older))), (term.phrase, *older)))
        # Which of them say the word in their text: the text's rows of the word along the window's rowids
        # (one walk, bounded), looked up by rowid below them.
        sql = "SELECT rowid FROM fts WHERE fts MATCH ? AND rowid >= ? ORDER BY rowid DESC LIMIT ?"
        said = [doc for (doc,) in conn.execute(sql, (term.phrase, oldest, EXACT_ROWS))]
        walked = said[-1] if len(said) == EXACT_ROWS else oldest
        hidden.difference_update(said)
        if below := sorted(doc for doc in hidden if doc < walked):
            hidden.difference_update(doc for (doc,) in conn.execute(seek.format("fts", _in(len(below))), (term.phrase, *below)))
        # Rows holding the word hidden: all of them in a window not full, else their density in it.
        count = len(newest) if len(newest) < _WINDOW else _WINDOW * ndocs / max(top_doc - oldest + 1, 1)
        credit = HIDDEN_SHARE * _idf(ndocs, count + _probe(conn, term))
        for doc in hidden:
            credits[doc] = credits.get(doc, 0.0) + credit
    if fresh := sorted(credits.keys() - scores.keys()) if filters.sql else []:
        # The scored rows passed the filters; the newest rows were taken unfiltered (a filter passing few
        # of them must not walk all the word's rows) and are filtered here.
        sql = f"SELECT d.id FROM docs AS d WHERE d.id {_in(len(fresh))}{filters.sql}"
        passed = {doc for (doc,) in conn.execute(sql, (*fresh, *filters.params))}
        for doc in set(fresh) - passed:
            del credits[doc]
    for doc, value in credits.items():
        scores[doc] = scores.get(doc, 0.0) + value


# --- fusion (hybrid recall) -----------------------------------------------------
def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], *, k: int = 60) -> list[tuple[int, float]]:
    """Fuse rankings of doc ids by reciprocal rank: ``score(d) = sum_i 1 / (k + rank_i(d))``, ranks from 1.

    A doc listed twice counts at its best rank. Returns ``(doc id, fused score)`` best first, ties to
    the higher doc id. Raises ValueError for a negative ``k``.
    """
    if k < 0:
        raise ValueError(f"k must not be negative, got {k}")
    scores: dict[int, float] = {}
    for ranking in rankings:
        seen: set[int] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=_rank_key, reverse=True)


def min_max_fusion(rankings: Sequence[Sequence[tuple[int, float]]]) -> list[tuple[int, float]]:
    """Fuse scored rankings by the sum of their min-max normalised scores (CombSUM).

    Each ranking's scores (higher is better, any scale) map to [0, 1] (all 1 when equal); a doc
    listed twice counts at its best. Returns ``(doc id, fused score)`` best first, ties to the higher
    doc id. Raises ValueError for a score that is not finite.
    """
    fused: dict[int, float] = {}
    for ranking in rankings:
        best: dict[int, float] = {}
        for doc, score in ranking:
            if not math.isfinite(score):
                raise ValueError(f"score of doc {doc} is not finite: {score}")
            best[doc] = max(score, best.get(doc, -math.inf))
        if not best:
            continue
        lo, hi = min(best.values()), max(best.values())
        for doc, score in best.items():
            fused[doc] = fused.get(doc, 0.0) + ((score - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(fused.items(), key=_rank_key, reverse=True)


# --- hits -------------------------------------------------------------------------
def assemble(
    db: IndexDB,
    ranked: Sequence[tuple[int, float]],
    filters: Filters,
    k: int,
    *,
    lent: Set[int],
    max_chars: int,
) -> tuple[list[RecallHit], Callable[[], dict[int, RecallContext]]]:
    """The hits for ranked docs (full texts), filters applied, texts deduplicated, and what reads each event
    hit's neighbour by position.

    At most ``k`` events, best first, then the summaries of chunks none of whose events is a hit, while
    the events leave room. An event of ``lent`` (matching no query word, ranked by its neighbours) is a
    hit only in place of a weaker match: not while the matching events fit in the answer (fewer than
    ``k``, their texts within ``max_chars``); it may then show as a hit's neighbour, if it is the one
    :func:`_neighbours` picks. The neighbours are read only when called: the answer usually has no room
    left for them.
    """
    events: list[Scored] = []
    summaries: list[Scored] = []
    matches = 0
    if ranked and not filters.empty_range:
        sql = f"SELECT id, chunk, seq, type, role, ts_min, h FROM docs AS d WHERE id {_in(len(ranked))}"
        params = (*(doc for doc, _ in ranked), *filters.params)
        meta = {r[0]: r[1:] for r in db.require().execute(sql + filters.sql, params)}
        seen: set[int] = set()
        for doc, score in ranked:
            m = meta.get(doc)
            # Filtered out, or the same text twice (a re-run command's output): one slot is enough.
            if m is None or m[-1] in seen:
                continue
            seen.add(m[-1])
            if m[1] is None:
                if len(summaries) < k and not filters.events_only:
                    summaries.append(Scored(doc, score, *m[:-1]))
            elif matches < k:
                events.append(Scored(doc, score, *m[:-1]))
                matches += doc not in lent
    chunks = sorted({s.chunk for s in events} | {s.chunk for s in summaries})
    rows = {r.id: r for r in db.chunk_rows(f"WHERE id {_in(len(chunks))}", chunks)}
    texts = _texts(db, [s.doc for s in events])
    hits: list[RecallHit] = []
    placed: list[Scored] = []
    for s in events:
        row = rows.get(s.chunk)
        if row is None or s.seq is None:
            continue
        placed.append(s)
        hits.append(
            RecallHit(
                chunk_id=row.chunk_id,
                source=row.source,
                kind="event",
                score=s.score,
                text=texts.get(s.doc, ""),
                first_seq=s.seq,
                last_seq=s.seq,
                type=s.type,
                role=s.role,
                timestamp=s.ts,
                degraded=bool(row.degraded),
            )
        )
    if lent:
        # The matching events crowd the answer (k of them, or more than it holds): a neighbour above
        # a weaker match takes its place; else it is no hit (perhaps a hit's context, fit_hits).
        matched = [h for s, h in zip(placed, hits, strict=True) if s.doc not in lent]
        crowded = matches == k or len(encode_hits(matched)) > max_chars
        last = max((i for i, s in enumerate(placed) if s.doc not in lent), default=-1)
        keep = [i for i, s in enumerate(placed) if s.doc not in lent or (crowded and i < last)][:k]
        placed, hits = [placed[i] for i in keep], [hits[i] for i in keep]
    shown = {s.chunk for s in placed}
    picked = [s for s in summaries if s.chunk not in shown][: k - len(placed)]
    hits += [summary_hit(rows[s.chunk], s.score) for s in picked]
    return hits, functools.partial(_neighbours, db, placed)


_OPEN, _CLOSE = "\x02", "\x03"
_MARKED: Final = re.compile(f"{_OPEN}([^{_OPEN}{_CLOSE}]+){_CLOSE}")


def matched_words(conn: sqlite3.Connection, terms: Sequence[Term], hit: RecallHit) -> dict[Term, float]:
    """The words of ``hit``'s text that matched ``terms`` in the index, as terms for the snippet finder,
    each with its BM25 IDF: the finder shows the region richest in rare words, those the hit ranked by.

    The porter stemmer matches "runs" for "running" (and folding "cafe" for "café"): FTS5's
    ``highlight()``, with the index's tokenizer, names the words a text holds in place of the
    query's own spelling. It seeks in every term's rows; each word found is probed as the search
    probes its terms (:func:`_split_by_rows`). Called only for a hit cut to fit.
    """
    words = word_terms(terms)
    # The doc's id first, by its chunk's rowid range: FTS5 takes ``rowid = ?`` as a seek only for a value,
    # not for a subquery (it then walks every row of the words).
    sql = (
        "SELECT d.id FROM chunks AS c JOIN docs AS d ON d.id BETWEEN c.doc_lo AND c.doc_hi"
        " WHERE c.chunk_id = ? AND d.seq IS ?"
    )
    found: set[str] = set()
    if words and (doc := conn.execute(sql, (hit.chunk_id, hit.seq)).fetchone()):
        sql = "SELECT highlight(fts, 0, ?, ?) FROM fts WHERE fts MATCH ? AND rowid = ?"
        for (marked,) in conn.execute(sql, (_OPEN, _CLOSE, or_expression(words), doc[0])):
            found.update(_MARKED.findall(marked))
    if not found:
        return {}
    # The largest row id is at least the row count (BM25's total) and, unlike count(*), one seek.
    total = int(conn.execute("SELECT max(id) FROM docs").fetchone()[0] or 0)
    text = " ".join(sorted(found))
    return {t: _idf(total, _probe(conn, t)) for t in query_terms(text, limit=len(text))}


def summary_hit(row: ChunkRow, score: float) -> RecallHit:
    """A chunk's summary as a hit (full text)."""
    return RecallHit(
        chunk_id=row.chunk_id,
        source=row.source,
        kind="summary",
        score=score,
        text=row.summary,
        first_seq=row.first_seq,
        last_seq=row.last_seq,
        degraded=bool(row.degraded),
    )


def _texts(db: IndexDB, docs: Sequence[int]) -> dict[int, str]:
    rows = db.require().execute(f"SELECT rowid, text FROM fts WHERE rowid {_in(len(docs))}", list(docs))
    return {doc: display_text(text) for doc, text in rows}


def _neighbours(db: IndexDB, events: Sequence[Scored]) -> dict[int, RecallContext]:
    """One neighbouring event per hit by position, same chunk: the reply after a user's words, else the turn before."""
    wanted = {s.doc: s.doc + 1 if s.role == "user" else s.doc - 1 for s in events}
    ids = sorted(set(wanted.values()))
    sql = f"SELECT id, chunk, seq, type, role FROM docs WHERE id {_in(len(ids))} AND seq IS NOT NULL"
    info = {r[0]: r for r in db.require().execute(sql, ids)}
    texts = _texts(db, list(info))
    out: dict[int, RecallContext] = {}
    for i, s in enumerate(events):
        r = info.get(wanted[s.doc])
        if r is not None and r[1] == s.chunk and texts.get(r[0]):
            out[i] = RecallContext(seq=r[2], type=r[3], role=r[4], text=texts[r[0]])
    return out
