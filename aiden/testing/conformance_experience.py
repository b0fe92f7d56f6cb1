"""The conformance suite every experience backend must pass (the storage protocols'
contract: :class:`~aiden.experience.episodestore.EpisodeBackend`,
:class:`~aiden.experience.recordstore.RecordBackend`).

Each ``check_*`` in :data:`CHECKS` takes an :data:`ExperienceFactory` and
raises AssertionError on a violation. A factory opens the experience store of
one storage (a memory root, a PostgreSQL namespace) afresh on every call: the
first call of a check sees it empty, a second call is another worker's view of
the same storage. Concurrent workers are stood in for by threads. No pytest here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from aiden.experience.episodes import Episode
from aiden.experience.episodestore import EpisodeBackend
from aiden.experience.records import EnvironmentProfile, ExperienceRecord, RecordKind, RecordStatus, terms_of
from aiden.experience.recordstore import RecordBackend

__all__ = [
    "CHECKS",
    "ExperienceFactory",
    "check_concurrent_workers_lose_no_commit",
    "check_episodes_commit_once_in_order_and_are_processed_once",
    "check_fresh_store_is_empty",
    "check_learning_lock_is_held_by_one_worker_at_a_time",
    "check_profiles_merge_newest_value_wins",
    "check_profiles_keep_a_reobserved_key_past_the_cap",
    "check_records_replace_by_id_in_place",
    "check_search_returns_applicable_active_records_best_first",
]

ExperienceFactory = Callable[[], tuple[EpisodeBackend, RecordBackend]]
"""Opens the experience store of one storage afresh: (episodes, records)."""

NOW = 1_780_000_000.0
ENV = "repo-acme"


def episode(n: int, *, environment: str = ENV) -> Episode:
    """Episode ``e-<n>``, finished at NOW + n."""
    return Episode(
        id=f"e-{n}",
        goal=f"task number {n}",
        environment=environment,
        started_at=NOW + n - 1,
        finished_at=NOW + n,
    )


def record(
    n: int,
    title: str,
    *,
    environment: str = ENV,
    kind: RecordKind = "procedure",
    status: RecordStatus = "active",
    expires_at: float | None = None,
) -> ExperienceRecord:
    """Record ``r-<n>`` with ``title`` as its title and body."""
    return ExperienceRecord(
        id=f"r-{n}",
        kind=kind,
        status=status,
        title=title,
        body=title,
        environment=environment,
        created_at=NOW + n,
        updated_at=NOW + n,
        expires_at=expires_at,
    )


def check_fresh_store_is_empty(make: ExperienceFactory) -> None:
    """Nothing is stored before the first write."""
    episodes, records = make()
    assert episodes.rows() == [] and episodes.pending() == []
    assert episodes.get("e-1") is None
    assert records.rows() == [] and records.records() == []
    assert records.search(terms_of("anything at all"), now=NOW, k=5) == []
    assert records.profile(ENV) is None


def check_episodes_commit_once_in_order_and_are_processed_once(make: ExperienceFactory) -> None:
    """A commit of a known id changes nothing; rows keep commit order; a processed episode is no longer pending."""
    episodes, _ = make()
    first, second = episode(1), episode(2)
    assert episodes.commit(second, now=NOW + 10) is True
    assert episodes.commit(first, now=NOW + 11) is True
    assert episodes.commit(second, now=NOW + 12) is False  # a retry after a lost acknowledgement
    assert [r.id for r in episodes.rows()] == ["e-2", "e-1"]
    assert episodes.get("e-1") == first
    row = episodes.rows()[0]
    assert (row.goal, row.environment, row.committed_at) == ("task number 2", ENV, NOW + 10)
    assert episodes.load(row) == second
    other, _ = make()  # another worker
    assert [r.id for r in other.pending()] == ["e-2", "e-1"]
    other.mark_processed(row, {"records": ["r-1"]})
    assert [r.id for r in episodes.pending()] == ["e-1"]
    assert [r.id for r in episodes.rows()] == ["e-2", "e-1"]


def check_records_replace_by_id_in_place(make: ExperienceFactory) -> None:
    """apply creates or replaces by id; a replaced record keeps its place; records() filters."""
    _, records = make()
    records.apply([record(1, "run pytest with -x"), record(2, "npm ci needs the cache", environment="")])
    records.apply([record(3, "old lesson", expires_at=NOW + 5)])
    replaced = record(1, "run pytest with -x -q", status="disputed")
    records.apply([replaced])
    assert [r.id for r in records.rows()] == ["r-1", "r-2", "r-3"]
    assert records.rows()[0].status == "disputed" and records.rows()[0].title == "run pytest with -x -q"
    _, other = make()
    assert [r.id for r in other.records()] == ["r-1", "r-2", "r-3"]
    assert other.records()[0] == replaced
    assert [r.id for r in other.records(environment=ENV)] == ["r-1", "r-3"]
    assert [r.id for r in other.records(environment=ENV, now=NOW + 10)] == ["r-1"]  # r-3 expired
    assert [r.id for r in other.records(environment="")] == ["r-2"]


def check_search_returns_applicable_active_records_best_first(make: ExperienceFactory) -> None:
    """Active, unexpired records of the environment or of every one, of the kinds asked, sharing a term."""
    _, records = make()
    records.apply(
        [
            record(1, "npm install fails without the registry cache"),
            record(2, "npm cache lives in /srv/npm", kind="fact"),
            record(3, "npm registry is down on fridays", status="disputed"),
            record(4, "npm cache expired lesson", expires_at=NOW + 1),
            record(5, "npm cache for every environment", environment=""),
            record(6, "npm cache of another repository", environment="repo-other"),
            record(7, "pytest needs the -p no:cacheprovider flag"),
        ]
    )
    terms = terms_of("npm cache")
    found = [r.id for r in records.search(terms, now=NOW + 10, k=10, environment=ENV)]
    assert sorted(found) == ["r-1", "r-2", "r-5"]
    assert [r.id for r in records.search(terms, now=NOW + 10, k=10, environment=ENV, kinds=["fact"])] == [
        "r-2"
    ]
    assert len(records.search(terms, now=NOW + 10, k=2, environment=ENV)) == 2
    assert "r-6" in [r.id for r in records.search(terms, now=NOW + 10, k=10)]  # no environment: every one
    assert [r.id for r in records.search(terms_of("pytest flag"), now=NOW + 10, k=10, environment=ENV)] == [
        "r-7"
    ]


def check_profiles_merge_newest_value_wins(make: ExperienceFactory) -> None:
    """A saved profile merges into the stored one, key by key, the newest value winning."""
    _, records = make()
    records.save_profile(
        EnvironmentProfile(
            environment=ENV, observations={"python": "3.11", "node": "20"}, episode_id="e-1", updated_at=NOW
        )
    )
    merged = records.save_profile(
        EnvironmentProfile(
            environment=ENV, observations={"node": "22", "os": "linux"}, episode_id="e-2", updated_at=NOW + 1
        )
    )
    assert merged.observations == {"python": "3.11", "node": "22", "os": "linux"}
    _, other = make()
    assert other.profile(ENV) == merged
    assert (merged.episode_id, merged.updated_at) == ("e-2", NOW + 1)
    assert other.profile("repo-other") is None


def check_profiles_keep_a_reobserved_key_past_the_cap(make: ExperienceFactory) -> None:
    """A profile keeps its newest 200 observations, a re-observed key counting as new."""
    _, records = make()
    full = {f"k{i}": "old" for i in range(200)}
    records.save_profile(EnvironmentProfile(environment=ENV, observations=full, episode_id="e-1", updated_at=NOW))
    merged = records.save_profile(
        EnvironmentProfile(
            environment=ENV, observations={"k0": "new", "k200": "new"}, episode_id="e-2", updated_at=NOW + 1
        )
    )
    assert len(merged.observations) == 200
    assert (merged.observations.get("k0"), merged.observations.get("k200")) == ("new", "new")
    assert "k1" not in merged.observations  # the oldest untouched key is the one dropped
    _, other = make()
    assert other.profile(ENV) == merged


def check_concurrent_workers_lose_no_commit(make: ExperienceFactory) -> None:
    """Two workers committing episodes and applying records at once: every one of them is kept."""
    workers = [make(), make()]
    errors: list[BaseException] = []

    def work(w: int) -> None:
        episodes, records = workers[w]
        try:
            for i in range(12):
                n = 100 * (w + 1) + i
                assert episodes.commit(episode(n), now=NOW + n)
                records.apply([record(n, f"lesson {n} about caching")])
                records.save_profile(
                    EnvironmentProfile(
                        environment=ENV,
                        observations={f"key-{n}": str(n)},
                        episode_id=f"e-{n}",
                        updated_at=NOW + n,
                    )
                )
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    episodes, records = make()
    assert sorted(r.id for r in episodes.rows()) == sorted(
        f"e-{100 * (w + 1) + i}" for w in range(2) for i in range(12)
    )
    assert sorted(r.id for r in records.rows()) == sorted(
        f"r-{100 * (w + 1) + i}" for w in range(2) for i in range(12)
    )
    profile = records.profile(ENV)
    assert profile is not None and len(profile.observations) == 24


def check_learning_lock_is_held_by_one_worker_at_a_time(make: ExperienceFactory) -> None:
    """A learning pass holds the lock; another worker's try answers False at once; released, it is free."""
    (_, first), (_, second) = make(), make()
    with first.learning() as held:
        assert held
        with second.learning() as also:
            assert not also
    with second.learning() as held:
        assert held


CHECKS: tuple[Callable[[ExperienceFactory], None], ...] = (
    check_fresh_store_is_empty,
    check_episodes_commit_once_in_order_and_are_processed_once,
    check_records_replace_by_id_in_place,
    check_search_returns_applicable_active_records_best_first,
    check_profiles_merge_newest_value_wins,
    check_profiles_keep_a_reobserved_key_past_the_cap,
    check_concurrent_workers_lose_no_commit,
    check_learning_lock_is_held_by_one_worker_at_a_time,
)
