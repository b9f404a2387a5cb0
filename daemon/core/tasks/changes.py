"""What a reload of the tasks changes: the names added, removed, changed and unchanged.

Pure: it compares two sets of definitions and says nothing about what happens to runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from daemon.wire.control_shapes import ReloadCounts


@dataclass(frozen=True)
class TaskChanges:
    """Task names by what a reload did to them, each sorted."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    def counts(self) -> ReloadCounts:
        return {
            "added": len(self.added),
            "removed": len(self.removed),
            "changed": len(self.changed),
            "unchanged": len(self.unchanged),
        }

    def names(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "unchanged": list(self.unchanged),
        }


def compare_tasks(old: Mapping[str, object], new: Mapping[str, object]) -> TaskChanges:
    """How ``new`` differs from ``old``. A task is unchanged when every field of its
    definition is equal (a handler is the same function object: modules are not re-imported)."""
    return TaskChanges(
        added=tuple(sorted(set(new) - set(old))),
        removed=tuple(sorted(set(old) - set(new))),
        changed=tuple(sorted(name for name in set(old) & set(new) if old[name] != new[name])),
        unchanged=tuple(sorted(name for name in set(old) & set(new) if old[name] == new[name])),
    )
