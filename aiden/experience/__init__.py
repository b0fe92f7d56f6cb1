"""Experience memory: what the agent learned by doing, each lesson citing the episode and event seqs that prove it.

Never injected into a prompt: the model asks with the ``recall_experience`` tool and gets a hint to
verify against current observations, not state. What to learn is pure policy
(:mod:`~aiden.experience.learner`); a configured LLM may only phrase the lessons
(:mod:`~aiden.experience.llmlearner`).
"""
