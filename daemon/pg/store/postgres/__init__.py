"""The job store on PostgreSQL: the only package that imports asyncpg.

``PostgresStore`` owns the one pool, which the administration and the migrator share. The
LISTEN has a connection of its own, because it is held for as long as the runner runs.
"""

from daemon.pg.store.postgres.runner_store import PostgresStore

__all__ = ["PostgresStore"]
