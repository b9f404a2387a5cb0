"""What every part of the Postgres runner shares: the store, the settings, the name this
replica holds its leases under (``owner``), and the one verdict on the database's health."""

from __future__ import annotations

from dataclasses import dataclass

from daemon.pg.health import DbHealth
from daemon.pg.store.base import JobStore
from daemon.settings import Settings


@dataclass(frozen=True, slots=True)
class Replica:
    store: JobStore
    settings: Settings
    owner: str
    health: DbHealth
