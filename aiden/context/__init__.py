"""What one model call sees (pure and synchronous): the prompt assembly and the two per-call mechanisms
acting on a never-persisted *copy* of the hot window: replay trimming and tool-result governance
(:mod:`~aiden.context.governance`), and the summary layer cut to its share of the window
(:mod:`~aiden.context.summary_fit`). Long-term memory is elsewhere.
"""
