"""Checking and repairing the Dream version history (``long_term/.git``) for ``aiden doctor``.

:func:`check_history` only reads: HEAD and its ref, every stored object (and
each pack's checksum), and the chain of versions from HEAD back to the first.
A ref that is missing, emptied or names nothing stored is the quiet kind of
damage: Dream would start a new root commit on top of it, and every earlier
version would drop out of ``dream_log`` without an error. A history already
cut off that way (a second, unrelated chain of versions) is reported too.

:func:`repair_history` writes (the caller holds ``.dream.lock``): when the
objects are intact it points HEAD and ``refs/heads/main`` at the newest
readable version (a cut-off history is joined back: the versions made after
the cut are recorded again on top of the older chain); otherwise it moves
``.git`` aside to ``.git.damaged-<ns>`` and starts a new history from the
current long-term files, which are the source of truth. The earlier versions
are then lost to ``dream_log`` and ``restore`` (the old directory stays for a
person to inspect), and the report says so.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec
from dulwich.objects import Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from aiden.errors import GitCorruptionError
from aiden.longterm.dream import read_long_term_files
from aiden.longterm.dream_edits import LONG_TERM_FILES
from aiden.longterm.files import ensure_dir
from aiden.longterm.gitstore import GitStore
from aiden.storage.fs import Storage, refuse_symlinks_below

__all__ = ["DAMAGED_PREFIX", "HistoryCheck", "check_history", "repair_history"]

DAMAGED_PREFIX: Final = ".git.damaged-"
"""A damaged ``.git`` moved aside by :func:`repair_history` is ``long_term/.git.damaged-<ns>``."""

_BRANCH: Final = Ref(b"refs/heads/main")
_HEAD: Final = Ref(b"HEAD")


class HistoryCheck(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`check_history` found."""

    problems: tuple[str, ...] = ()
    versions: int = 0
    """Versions on HEAD's chain, all readable."""
    objects_intact: bool = True
    """The repository opens, every object reads and every pack's checksum holds."""
    tip: str | None = None
    """The newest version whose whole chain reads (what a repaired HEAD names)."""
    cut_off: tuple[str, ...] = ()
    """Versions after a cut, oldest first: HEAD's chain down to a root that is not the first version."""


class _Objects(msgspec.Struct, kw_only=True):
    commits: dict[ObjectID, Commit]
    unreadable: list[str]


def _read_objects(repo: Repo) -> _Objects:
    found = _Objects(commits={}, unreadable=[])
    for pack in repo.object_store.packs:
        try:
            pack.check()
        except Exception as exc:  # dulwich raises many unrelated types for a damaged pack
            found.unreadable.append(f"a pack fails its check: {type(exc).__name__}: {exc}")
    for sha in repo.object_store:
        try:
            obj = repo.object_store[sha]
            if isinstance(obj, Commit):
                found.commits[sha] = obj
            elif isinstance(obj, Tree):
                for entry in obj.items():
                    if entry.sha not in repo.object_store:
                        found.unreadable.append(f"tree {sha.decode()} names a missing object")
        except Exception as exc:
            found.unreadable.append(f"object {sha.decode()}: {type(exc).__name__}: {exc}")
    return found


def _chain(commits: Mapping[ObjectID, Commit], start: ObjectID) -> tuple[list[ObjectID], ObjectID | None]:
    """Commit ids from ``start`` back along first parents (newest first), and the first id not stored."""
    out: list[ObjectID] = []
    cur: ObjectID | None = start
    while cur is not None:
        commit = commits.get(cur)
        if commit is None or cur in out:
            return out, cur
        out.append(cur)
        cur = commit.parents[0] if commit.parents else None
    return out, None


def _tip(commits: Mapping[ObjectID, Commit], skip: frozenset[ObjectID] = frozenset()) -> list[ObjectID]:
    """The newest whole chain (newest first) among ``commits`` not in ``skip``; [] if none."""
    parents = {p for c in commits.values() for p in c.parents}
    best: list[ObjectID] = []
    for sha in commits:
        if sha in parents or sha in skip:
            continue
        chain, broken = _chain(commits, sha)
        if broken is None and (
            not best or (commits[sha].commit_time, len(chain)) > (commits[best[0]].commit_time, len(best))
        ):
            best = chain
    return best


def _key(commit: Commit) -> tuple[bytes, bytes, int]:
    return commit.tree, commit.message, commit.commit_time


def _versions(n: int) -> str:
    return "1 version is" if n == 1 else f"{n} versions are"


def _head_problem(repo: Repo, git_dir: Path) -> tuple[ObjectID | None, str | None]:
    if not (git_dir / "HEAD").is_file():
        return None, "long_term/.git/HEAD is missing"
    names, sha = repo.refs.follow(_HEAD)
    ref = names[-1].decode("utf-8", errors="replace") if names else "HEAD"
    if sha is None:
        return None, f"long_term/.git: {ref} is missing or empty"
    if len(sha) != 40 or any(c not in b"0123456789abcdef" for c in sha):
        shown = sha[:60].decode("utf-8", errors="replace")
        return None, f"long_term/.git: {ref} holds {shown!r}, not a commit id"
    return sha, None


def _check(repo: Repo, git_dir: Path) -> HistoryCheck:
    objects = _read_objects(repo)
    problems = [f"long_term/.git: {p}" for p in objects.unreadable]
    head, head_problem = _head_problem(repo, git_dir)
    commits = objects.commits
    versions = 0
    cut: list[ObjectID] = []
    tip = _tip(commits)
    if head_problem is not None:
        problems.append(head_problem)
    elif head is not None:
        chain, broken = _chain(commits, head)
        versions = len(chain)
        if broken is not None:
            where = "HEAD" if not chain else f"version {len(chain)} back from HEAD"
            problems.append(f"long_term/.git: {where} ({broken.decode()}) is missing or unreadable")
        else:
            # Another whole chain, sharing no version with HEAD's: HEAD was cut off from it and started
            # afresh. Versions HEAD's chain holds again (the originals of a rejoin) are no such chain.
            kept = {_key(commits[c]) for c in chain}
            older = _tip(commits, skip=frozenset(c for c in commits if _key(commits[c]) in kept))
            if older and not set(older) & set(chain):
                cut = chain[::-1]
                problems.append(
                    f"long_term/.git: {_versions(len(older))} (newest {older[0].decode()[:12]}) not reachable "
                    f"from HEAD: the history was cut off and restarted {len(chain)} versions ago"
                )
                tip = older
            else:
                tip = chain
    if head is None and head_problem is not None and commits:
        problems.append(
            f"long_term/.git: {_versions(len(commits))} stored out of dream_log's reach; "
            "the next Dream would start a new history without them"
        )
    return HistoryCheck(
        problems=tuple(problems),
        versions=versions,
        objects_intact=not objects.unreadable,
        tip=tip[0].decode() if tip else None,
        cut_off=tuple(c.decode() for c in cut),
    )


def check_history(long_term: Path) -> HistoryCheck:
    """Check ``long_term/.git`` without writing; a root that never dreamed (no ``.git``) is fine."""
    git_dir = long_term / ".git"
    try:
        mode = os.lstat(git_dir).st_mode
    except FileNotFoundError:
        return HistoryCheck()
    if not stat.S_ISDIR(mode):
        return HistoryCheck(problems=("long_term/.git is not a directory",), objects_intact=False)
    repo: Repo | None = None
    try:
        refuse_symlinks_below(git_dir)
        repo = Repo(str(git_dir))
        return _check(repo, git_dir)
    except Exception as exc:  # dulwich and the OS under it: any failure is damage to report
        problem = f"long_term/.git is not a usable git repository: {type(exc).__name__}: {exc}"
        return HistoryCheck(problems=(" ".join(problem.split()),), objects_intact=False)
    finally:
        if repo is not None:
            repo.close()


def _point_head(storage: Storage, git_dir: Path, tip: str) -> None:
    ensure_dir(storage, git_dir / "refs" / "heads")
    storage.write_atomic(git_dir / "refs" / "heads" / "main", tip.encode() + b"\n")
    storage.write_atomic(git_dir / "HEAD", b"ref: " + _BRANCH + b"\n")


def _rejoin(git_dir: Path, check: HistoryCheck) -> str:
    """Record the versions after the cut again on top of the older chain; the new tip's id."""
    # dulwich writes the objects with plain os calls, as in GitStore._open: never through a symlink.
    refuse_symlinks_below(git_dir)
    repo = Repo(str(git_dir))
    try:
        parent = ObjectID(check.tip.encode()) if check.tip else None
        for sha in check.cut_off:
            new = repo[ObjectID(sha.encode())].copy()
            if not isinstance(new, Commit):  # checked a commit moments ago, under .dream.lock
                raise GitCorruptionError(f"{sha} is no longer a commit")
            new.parents = [parent] if parent is not None else []
            repo.object_store.add_object(new)
            parent = new.id
        return parent.decode() if parent is not None else ""
    finally:
        repo.close()


def _start_afresh(long_term: Path, storage: Storage, now: float) -> list[str]:
    git_dir = long_term / ".git"
    aside = long_term / f"{DAMAGED_PREFIX}{time.time_ns()}"
    storage.rename_noreplace(git_dir, aside)
    storage.fsync_dir(long_term)
    lines = [
        f"moved the damaged long_term/.git to long_term/{aside.name}; "
        "its version history is lost to dream_log and restore"
    ]
    contents = read_long_term_files(long_term)
    message = (
        f"repair: a new version history from the current long-term files (the damaged one is {aside.name})"
    )
    commit = GitStore(long_term, LONG_TERM_FILES, storage).commit(contents, message, now=int(now))
    if commit is None:
        lines.append("no long-term files to version yet: the next Dream starts the history")
    else:
        lines.append(f"started a new version history from the current long-term files ({commit[:12]})")
    return lines


def repair_history(long_term: Path, storage: Storage, *, now: float) -> list[str]:
    """Repair ``long_term/.git`` as :func:`check_history` finds it; one line per repair ([] if sound).

    The caller holds ``long_term/.dream.lock``, so no Dream commits meanwhile.
    """
    check = check_history(long_term)
    if not check.problems:
        return []
    git_dir = long_term / ".git"
    if check.objects_intact and check.tip is not None:
        if check.cut_off:
            tip = _rejoin(git_dir, check)
            line = (
                f"joined the {len(check.cut_off)} versions made after the cut back onto the earlier history; "
                f"HEAD is {tip[:12]}"
            )
        else:
            tip = check.tip
            line = f"pointed HEAD (refs/heads/main) at the newest readable version {tip[:12]}"
        _point_head(storage, git_dir, tip)
        if not check_history(long_term).problems:
            return [line]
    return _start_afresh(long_term, storage, now)
