"""Long-term memory in PostgreSQL: the backend a memory opened on a PostgreSQL session store uses.

Rows of the session store's database instead of files under ``memory/long_term/``
(tables: :mod:`~aiden.longterm.postgres.schema`), shared by every memory with the
same long-term namespace. :class:`~aiden.longterm.postgres.backend.PostgresLongTermBackend`
is the :class:`~aiden.longterm.backend.LongTermBackend`; :func:`~aiden.longterm.service.select_long_term` selects it.
"""
