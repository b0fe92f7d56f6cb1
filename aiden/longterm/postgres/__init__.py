"""Long-term memory in PostgreSQL (see :mod:`~aiden.longterm.postgres.backend`)."""
