"""Long-term memory in PostgreSQL: :class:`~aiden.longterm.postgres.backend.PostgresLongTermBackend`.

The backend of a memory opened on a PostgreSQL session store (selected by
:func:`~aiden.longterm.service.select_long_term`); see :mod:`~aiden.longterm.postgres.backend`.
"""
