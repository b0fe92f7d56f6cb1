"""Experience memory (issue #21, seed 002 "Device And Episode Memory"): what the agent learned by doing.

Beside the session memory (this conversation) and long-term memory (what the
user or the agent chose to save), experience memory keeps *lessons from
episodes*: procedures that worked (after a failure, or at the first try of a
run that completed its goal), calibrated values, failures to avoid, facts
observed, each citing the episode and the event seqs that prove it. It is
never injected into a prompt; the model asks for it with the
``recall_experience`` tool, and what it gets is a hint to verify against
current observations, not state.

* :mod:`~aiden.experience.episodes`: the episode data, its recorder, the run's
  tracker and the reading of its trace (pure);
* :mod:`~aiden.experience.episodestore`: committed episodes on disk, the
  ``processed`` markers the worker leaves, and the episode storage protocol;
* :mod:`~aiden.experience.records`: record and profile formats, and how a
  record learned again is merged (pure);
* :mod:`~aiden.experience.recordstore`: records and environment profiles on
  disk, and the record storage protocol;
* :mod:`~aiden.experience.postgres`: both stores over PostgreSQL;
* :mod:`~aiden.experience.ranking`: how recall orders the records (BM25, fused
  with the vector similarity when there is an embedder) and the records'
  vectors (in memory and in ``experience/vectors.msgpack``);
* :mod:`~aiden.experience.extension`: how experience memory joins an open memory (its actor, its
  methods on ``Memory``) and the ``recall_experience`` tool schema and handler;
* :mod:`~aiden.experience.service`: the room's operations the actor serves;
* :mod:`~aiden.experience.messages`: the actor's surface (messages and port).

The learner itself is pure policy: :mod:`aiden.experience.learner` (with
:mod:`~aiden.experience.navigation`); a configured LLM may only phrase its
lessons (:mod:`~aiden.experience.llmlearner`).
"""
