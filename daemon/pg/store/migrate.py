"""Schema migrations: the numbered ``.sql`` files shipped in ``daemon/pg/store/migrations``.

Each file is applied in its own transaction under an advisory lock, so several replicas may run
``runbroker migrate`` at once and the second finds nothing to do.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    checksum: str
    sql: str


def load_migrations() -> list[Migration]:
    """Every migration file, in version order. A duplicate version is a packaging bug."""
    found: dict[int, Migration] = {}
    folder = resources.files("daemon.pg.store") / "migrations"
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if not match:
            continue
        sql = entry.read_text(encoding="utf-8")
        version = int(match.group(1))
        if version in found:
            raise RuntimeError(f"two migrations numbered {version:04d}")
        name = entry.name.removesuffix(".sql")
        checksum = hashlib.sha256(sql.encode()).hexdigest()
        found[version] = Migration(version, name, checksum, sql)
    return [found[v] for v in sorted(found)]


def as_tuples(migrations: list[Migration]) -> list[tuple[int, str, str, str]]:
    return [(m.version, m.name, m.checksum, m.sql) for m in migrations]


@functools.cache
def latest_migration_version() -> int:
    """The schema version this runbroker expects: its newest migration's."""
    return load_migrations()[-1].version
