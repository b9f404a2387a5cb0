"""The job store on PostgreSQL: the only package that imports asyncpg.

``PostgresStore`` (``runner_store``) is the runner's ``JobStore`` and owns the one lazily
connecting pool (``pool``); the administration of the ``jobs`` commands (``admin_store``,
``store.admin``) and ``migrate`` (``migrator``, ``store.migrator``) are built on that pool
beside it; the LISTEN has a connection of its own (``listen``). Rows are decoded and batches
encoded in ``rows``; every SQL statement is in ``daemon.pg.store.queries``.
"""

from daemon.pg.store.postgres.runner_store import PostgresStore

__all__ = ["PostgresStore"]
