"""``runbroker migrate`` on PostgreSQL: the migrations not yet applied, under a lock."""

from __future__ import annotations

from collections.abc import Sequence

from daemon.pg.store.postgres.pool import PgPool
from daemon.pg.store.queries.admin import (
    APPLIED_MIGRATIONS,
    CREATE_MIGRATIONS_TABLE,
    LOCK_MIGRATIONS,
    RECORD_MIGRATION,
    UNLOCK_MIGRATIONS,
)


class PgMigrator:
    """Applies the migration files (``daemon.pg.store.migrate`` reads them).

    Safe from several replicas at once: the second waits for the lock and finds nothing to do.
    Built on the pool of the ``PostgresStore`` it stands beside (``store.migrator``)."""

    def __init__(self, pool: PgPool) -> None:
        self._pool = pool

    async def migrate(self, migrations: Sequence[tuple[int, str, str, str]]) -> list[str]:
        """Apply the (version, name, checksum, sql) not yet applied, under an advisory lock."""
        applied: list[str] = []
        async with self._pool.connection() as conn:
            await conn.execute(LOCK_MIGRATIONS)
            try:
                await conn.execute(CREATE_MIGRATIONS_TABLE)
                done = {row["version"] for row in await conn.fetch(APPLIED_MIGRATIONS)}
                for version, name, checksum, sql in migrations:
                    if version in done:
                        continue
                    async with conn.transaction():
                        await conn.execute(sql)
                        await conn.execute(RECORD_MIGRATION, version, name, checksum)
                    applied.append(name)
            finally:
                await conn.execute(UNLOCK_MIGRATIONS)
                # The pool does not reset sessions (_keep_session): undo whatever session state
                # a migration's SQL may have set before the connection serves the runner.
                await conn.reset()
        return applied
