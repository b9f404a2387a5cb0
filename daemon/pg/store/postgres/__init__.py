"""The job store on PostgreSQL: the only package that imports asyncpg.

``PostgresStore`` is the runner's ``JobStore`` (``runner_store``), the administration of the
``jobs`` commands (``admin_store``) and ``migrate`` (``migrator``), all over one lazily
connecting pool (``pool``); the LISTEN has a connection of its own (``listen``). Rows are
decoded and batches encoded in ``rows``; every SQL statement is in ``daemon.pg.store.queries``.
"""

from daemon.pg.store.postgres.admin_store import PgAdminStore
from daemon.pg.store.postgres.migrator import PgMigrator
from daemon.pg.store.postgres.runner_store import PgRunnerStore


class PostgresStore(PgRunnerStore, PgAdminStore, PgMigrator):
    """``JobStore`` on PostgreSQL, plus the administration the ``jobs`` commands need."""


__all__ = ["PostgresStore"]
