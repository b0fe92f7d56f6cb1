"""Version history of the long-term files in a git repository at ``long_term/.git`` (dulwich).

Commits are built directly from file contents (blob, tree, commit objects), so
dulwich never touches the working files: those are written by
:meth:`Storage.write_atomic` like every other aiden file. dulwich writes only
inside ``.git`` (objects via temp file + rename, refs via lock files). HEAD is
moved with compare-and-swap, so a concurrent commit cannot be lost silently.
Blocking I/O: call from a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, TypeVar

from dulwich.errors import NotGitRepository
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from aiden.errors import AidenError, DreamError, GitCorruptionError, VersionNotFoundError
from aiden.longterm.files import ensure_dir
from aiden.longterm.versions import Version, check_target, unique_match
from aiden.storage.fs import Storage, refuse_symlinks_below

__all__ = ["GitStore", "Version"]

_AUTHOR: Final = b"aiden dream <dream@aiden.invalid>"
_HEAD: Final = Ref(b"HEAD")
_MODE: Final = 0o100644
_T = TypeVar("_T")

log = logging.getLogger("aiden.longterm")

# A damaged repository makes dulwich (and the OS under it) raise many unrelated
# types: KeyError for a bad ref or a missing object, zlib/Buffer/struct errors for
# flipped or truncated object bytes, OSError for a half-deleted .git, and classes
# deriving from Exception directly (SymrefLoop for a HEAD naming itself,
# RefFormatError for a ref path leaving refs/). A list of them always missed one,
# and a missed one ended the runtime's task group, so the boundary takes every
# Exception that is not aiden's own. Exception subclasses only: cancellation
# (a BaseException) is never caught here.

# dulwich's ref lock files (``<ref>.lock``, created O_EXCL, renamed over the ref):
# a committer SIGKILLed between the two leaves one, and every later commit then
# fails with FileLocked. Objects never use lock files (temp file + rename).
_REF_LOCK_DIRS: Final = ("", "refs")


class GitStore:
    """Commits and reads versions of ``files`` (names inside ``root``) in ``root/.git``."""

    def __init__(self, root: Path, files: Sequence[str], storage: Storage) -> None:
        self.root = root
        self._storage = storage
        self.git_dir = root / ".git"
        self.files = tuple(files)
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
        """``fn(repo)`` under the lock; third-party errors become :class:`GitCorruptionError`.

        This is the boundary that keeps dulwich's exceptions out of Dream's
        schedule (which tolerates only AidenError) and the runtime's task group.
        aiden's own errors pass through. Only a message survives a foreign error:
        its traceback pins dulwich's mmapped packs, which could then not be
        closed (BufferError) and would leak.
        """
        with self._lock:
            failure = ""
            repo: Repo | None = None
            try:
                repo = self._open(create=create)
                if repo is None:
                    return missing()
                return fn(repo)
            except AidenError:
                raise
            except Exception as exc:
                failure = f"{type(exc).__name__}: {exc}"
            finally:
                if repo is not None and not failure:
                    self._close(repo)
            if repo is not None:
                self._close(repo)  # the traceback is gone now, so the packs can be closed
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

        def head(repo: Repo) -> str | None:
            found = self._head(repo)
            return found.decode() if found is not None else None

        return self._with_repo(head, create=False, missing=lambda: None)

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

    def _remove_dead_ref_locks(self) -> int:
        """Ref lock files left by a committer that died mid-update (see :meth:`commit`); returns how many."""
        removed = 0
        for sub in _REF_LOCK_DIRS:
            top = self.git_dir / sub if sub else self.git_dir
            paths = sorted(top.rglob("*.lock")) if sub else sorted(top.glob("*.lock"))
            for path in paths:
                if path.is_file() and not path.is_symlink():
                    log.warning("removing %s, left by a Dream that did not finish its commit", path)
                    self._storage.unlink(path)
                    removed += 1
        return removed

    def commit(self, contents: Mapping[str, bytes | None], message: str, *, now: int) -> str | None:
        """Record ``contents`` (None = file absent) as a new version; None if identical to HEAD.

        The caller holds ``.dream.lock`` (Dream and restore do, and nothing else
        commits), so no other committer is alive: a ref lock file found here was
        left by a killed one and is removed before HEAD moves.
        """

        def record(repo: Repo) -> str | None:
            if self.git_dir.is_dir():
                self._remove_dead_ref_locks()
            head = self._head(repo)
            if head is not None and self._tree_files(repo, head) == {
                k: v for k, v in contents.items() if v is not None
            }:
                return None
            tree = Tree()
            objects: list[Blob | Tree | Commit] = []
            for name in sorted(contents):
                data = contents[name]
                if data is None:
                    continue
                blob = Blob.from_string(data)
                objects.append(blob)
                tree.add(name.encode("utf-8"), _MODE, blob.id)
            objects.append(tree)
            commit = Commit()
            commit.tree = tree.id
            commit.parents = [head] if head is not None else []
            commit.author = commit.committer = _AUTHOR
            commit.author_time = commit.commit_time = now
            commit.author_timezone = commit.commit_timezone = 0
            commit.encoding = b"UTF-8"
            commit.message = message.strip().encode("utf-8") + b"\n"
            objects.append(commit)
            repo.object_store.add_objects([(obj, None) for obj in objects])
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
