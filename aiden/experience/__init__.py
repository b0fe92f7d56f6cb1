"""Experience memory (issue #21, seed 002 "Device And Episode Memory"): what the agent learned by doing.

Beside the session memory (this conversation) and long-term memory (what the
user or the agent chose to save), experience memory keeps *lessons from
episodes*: procedures that worked (after a failure, or at the first try of a
run that completed its goal), calibrated values, failures to avoid, facts
observed, each citing the episode and the event seqs that prove it. It is
never injected into a prompt; the model asks for it with the
``recall_experience`` tool, and what it gets is a hint to verify against
current observations, not state.

* :mod:`~aiden.experience.episodes`: the episode data and its recorder (pure);
* :mod:`~aiden.experience.episodestore`: committed episodes on disk, the
  ``processed`` markers the worker leaves;
* :mod:`~aiden.experience.records`: record and profile formats (pure);
* :mod:`~aiden.experience.recordstore`: records and environment profiles on disk;
* :mod:`~aiden.experience.vectors`: the records' vectors when the memory has an
  embedder (in memory and in ``experience/vectors.msgpack``);
* :mod:`~aiden.experience.tool`: the ``recall_experience`` tool schema and handler;
* :mod:`~aiden.experience.service`: the room's operations the actor serves;
* :mod:`~aiden.experience.messages` / :mod:`~aiden.experience.port`: the actor's surface.

The learner itself is pure policy: :mod:`aiden.experience.learner` (with
:mod:`~aiden.experience.trace` and :mod:`~aiden.experience.facts`), and so is
how recall orders the records: :mod:`aiden.experience.ranking` (BM25, fused with the
vector similarity when there is an embedder).
"""
