"""Version history of the long-term files in ``long_term/.git`` (dulwich), and its repair.

Commits are built from file contents, so dulwich writes only inside ``.git``; HEAD moves by
compare-and-swap. Blocking: call from a worker thread.

:func:`check_history` only reads; it also reports a ref that names nothing stored and a history
cut off into a second chain, since Dream would otherwise silently start a new root.
:func:`repair_history` (caller holds ``.dream.lock``) re-points HEAD at the newest readable
version, or moves ``.git`` aside and starts anew from the current files, which are the source of truth.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, TypeVar

import msgspec
from dulwich.errors import NotGitRepository
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from aiden.errors import AidenError, DreamError, GitCorruptionError, VersionNotFoundError
from aiden.longterm.dream_edits import LONG_TERM_FILES, Version, check_target, unique_match
from aiden.longterm.files import ensure_dir, read_regular
from aiden.storage.fs import Storage, refuse_symlinks_below

__all__ = [
    "DAMAGED_PREFIX",
    "GitStore",
    "HistoryCheck",
    "Version",
    "check_history",
    "read_long_term_files",
    "repair_history",
]

_AUTHOR: Final = b"aiden dream <dream@aiden.invalid>"
_HEAD: Final = Ref(b"HEAD")
_MODE: Final = 0o100644
_T = TypeVar("_T")

log = logging.getLogger("aiden.longterm")


def read_long_term_files(root: Path) -> dict[str, bytes | None]:
    """SOUL.md, USER.md and MEMORY.md under ``root``, whole and byte for byte (None: absent; blocking).

    Never cut nor decoded: what is read is versioned and may be written back, and a hand-written
    file is the only copy of what it holds.
    """
    return {name: read_regular(root / name) for name in LONG_TERM_FILES}


class GitStore:
    """Commits and reads versions of the long-term files (names inside ``root``) in ``root/.git``."""

    def __init__(self, root: Path, storage: Storage) -> None:
        self.root = root
        self._storage = storage
        self.git_dir = root / ".git"
        self._lock = threading.Lock()

    def _open(self, *, create: bool) -> Repo | None:
        # dulwich writes objects and refs with plain os calls, not through Storage: a symlink
        # planted as .git, objects/, objects/pack/ or refs/ would take Dream's writes outside.
        refuse_symlinks_below(self.git_dir)
        try:
            return Repo(str(self.git_dir))
        except NotGitRepository as exc:
            if self.git_dir.exists():
                # Present but not a repository (e.g. objects/ deleted): re-initializing
                # would fail or hide the damage, so report it.
                raise GitCorruptionError(f"{self.git_dir} is not a usable git repository") from exc
            if not create:
                return None
        ensure_dir(self._storage, self.root)
        repo = Repo.init_bare(str(self.git_dir), mkdir=True, default_branch=b"main")
        self._storage.fsync_dir(self.root)
        return repo

    def _with_repo(self, fn: Callable[[Repo], _T], *, create: bool, missing: Callable[[], _T]) -> _T:
        """``fn(repo)`` under the lock; every non-aiden Exception becomes :class:`GitCorruptionError`.

        A damaged repository makes dulwich raise too many unrelated types to list, and Dream's schedule
        tolerates only AidenError. Only the message survives: the traceback pins dulwich's mmapped packs.
        """
        with self._lock:
            failure = ""
            repo: Repo | None = None
            try:
                repo = self._open(create=create)
                return missing() if repo is None else fn(repo)
            except AidenError:
                raise
            except Exception as exc:
                failure = f"{type(exc).__name__}: {exc}"
            finally:
                # After a foreign error, the handler above has dropped its traceback by now.
                if repo is not None:
                    self._close(repo)
            raise GitCorruptionError(f"long-term git history at {self.git_dir} is damaged: {failure}")

    def _close(self, repo: Repo) -> None:
        try:
            repo.close()
        except Exception as exc:  # a damaged pack may refuse; the result is already decided
            log.warning("closing %s failed: %s: %s", self.git_dir, type(exc).__name__, exc)

    @staticmethod
    def _head(repo: Repo) -> ObjectID | None:
        try:
            return repo.refs[_HEAD]
        except KeyError:
            return None

    def head(self) -> str | None:
        """The current version's commit id (None before the first commit)."""
        found = self._with_repo(self._head, create=False, missing=lambda: None)
        return found.decode() if found is not None else None

    @staticmethod
    def _tree_files(repo: Repo, commit_id: ObjectID) -> dict[str, bytes]:
        commit = repo[commit_id]
        if not isinstance(commit, Commit):
            raise VersionNotFoundError(f"{commit_id.decode()} is not a commit")
        tree = repo[commit.tree]
        if not isinstance(tree, Tree):
            raise VersionNotFoundError(f"{commit_id.decode()} has no tree")
        out: dict[str, bytes] = {}
        for entry in tree.items():
            blob = repo[entry.sha]
            if isinstance(blob, Blob):
                out[entry.path.decode("utf-8")] = blob.as_raw_string()
        return out

    def _remove_dead_ref_locks(self) -> None:
        """Remove ref lock files left by a committer that died mid-update (see :meth:`commit`)."""
        # A committer killed between creating ``<ref>.lock`` and renaming it over the ref leaves one,
        # and every later commit then fails with FileLocked.
        found = [*self.git_dir.glob("*.lock"), *(self.git_dir / "refs").rglob("*.lock")]
        for path in sorted(found):
            if path.is_file() and not path.is_symlink():
                log.warning("removing %s, left by a Dream that did not finish its commit", path)
                self._storage.unlink(path)

    def commit(self, contents: Mapping[str, bytes | None], message: str, *, now: int) -> str | None:
        """Record ``contents`` (None = file absent) as a new version; None if identical to HEAD.

        The caller holds ``.dream.lock``, so a ref lock file found here was left by a killed committer and is removed.
        """

        def record(repo: Repo) -> str | None:
            self._remove_dead_ref_locks()
            head = self._head(repo)
            present = {k: v for k, v in contents.items() if v is not None}
            if head is not None and self._tree_files(repo, head) == present:
                return None
            blobs = {name: Blob.from_string(present[name]) for name in sorted(present)}
            tree = Tree()
            for name, blob in blobs.items():
                tree.add(name.encode("utf-8"), _MODE, blob.id)
            commit = Commit()
            commit.tree = tree.id
            commit.parents = [head] if head is not None else []
            commit.author = commit.committer = _AUTHOR
            commit.author_time = commit.commit_time = now
            commit.author_timezone = commit.commit_timezone = 0
            commit.encoding = b"UTF-8"
            commit.message = message.strip().encode("utf-8") + b"\n"
            repo.object_store.add_objects([(obj, None) for obj in (*blobs.values(), tree, commit)])
            if not repo.refs.set_if_equals(_HEAD, head, commit.id):
                raise DreamError("long-term history changed concurrently; commit not recorded")
            return commit.id.decode()

        return self._with_repo(record, create=True, missing=lambda: None)

    def log(self, limit: int = 20) -> list[Version]:
        """The newest ``limit`` versions, newest first."""

        def versions(repo: Repo) -> list[Version]:
            if self._head(repo) is None:
                return []
            return [
                Version(
                    commit_id=entry.commit.id.decode(),
                    timestamp=entry.commit.commit_time,
                    message=entry.commit.message.decode("utf-8", errors="replace").strip(),
                )
                for entry in repo.get_walker(max_entries=limit)
            ]

        return self._with_repo(versions, create=False, missing=list)

    def resolve(self, target: str | int) -> str:
        """A full commit id for ``target``: an id or unique prefix (>= 4 hex), or steps back from HEAD."""
        checked = check_target(target)
        if isinstance(checked, int):
            versions = self.log(limit=checked + 1)
            if len(versions) <= checked:
                raise VersionNotFoundError(f"there are only {len(versions)} versions")
            return versions[checked].commit_id
        return unique_match([v.commit_id for v in self.log(limit=10_000) if v.commit_id.startswith(checked)], target)

    def read(self, commit_id: str) -> dict[str, bytes]:
        """The files of version ``commit_id`` (name -> content)."""

        def read(repo: Repo) -> dict[str, bytes]:
            try:
                return self._tree_files(repo, ObjectID(commit_id.encode()))
            except (KeyError, ValueError):
                # No ``from``: the cause's traceback would pin the repository's packs.
                raise VersionNotFoundError(f"unknown version {commit_id!r}") from None

        def missing() -> dict[str, bytes]:
            raise VersionNotFoundError("no long-term history yet")

        return self._with_repo(read, create=False, missing=missing)


DAMAGED_PREFIX: Final = ".git.damaged-"
"""A damaged ``.git`` moved aside by :func:`repair_history` is ``long_term/.git.damaged-<ns>``."""

_BRANCH: Final = Ref(b"refs/heads/main")


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


def _read_objects(repo: Repo) -> tuple[dict[ObjectID, Commit], list[str]]:
    """The commits stored, and what could not be read."""
    commits: dict[ObjectID, Commit] = {}
    unreadable: list[str] = []
    for pack in repo.object_store.packs:
        try:
            pack.check()
        except Exception as exc:  # dulwich raises many unrelated types for a damaged pack
            unreadable.append(f"a pack fails its check: {type(exc).__name__}: {exc}")
    for sha in repo.object_store:
        try:
            obj = repo.object_store[sha]
            if isinstance(obj, Commit):
                commits[sha] = obj
            elif isinstance(obj, Tree):
                for entry in obj.items():
                    if entry.sha not in repo.object_store:
                        unreadable.append(f"tree {sha.decode()} names a missing object")
        except Exception as exc:
            unreadable.append(f"object {sha.decode()}: {type(exc).__name__}: {exc}")
    return commits, unreadable


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
    commits, unreadable = _read_objects(repo)
    problems = [f"long_term/.git: {p}" for p in unreadable]
    head, head_problem = _head_problem(repo, git_dir)
    versions = 0
    cut: list[ObjectID] = []
    tip = _tip(commits)
    if head_problem is not None:
        problems.append(head_problem)
        if commits:
            problems.append(
                f"long_term/.git: {_versions(len(commits))} stored out of dream_log's reach; "
                "the next Dream would start a new history without them"
            )
    elif head is not None:  # always, without a problem
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
    return HistoryCheck(
        problems=tuple(problems),
        versions=versions,
        objects_intact=not unreadable,
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
    message = (
        f"repair: a new version history from the current long-term files (the damaged one is {aside.name})"
    )
    commit = GitStore(long_term, storage).commit(
        read_long_term_files(long_term), message, now=int(now)
    )
    return [
        f"moved the damaged long_term/.git to long_term/{aside.name}; "
        "its version history is lost to dream_log and restore",
        "no long-term files to version yet: the next Dream starts the history"
        if commit is None
        else f"started a new version history from the current long-term files ({commit[:12]})",
    ]


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
