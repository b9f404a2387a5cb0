"""The store's statements that restate one another stay in step.

``SELECT_DUE`` (the planner's path) and ``CLAIM_PLAIN`` (the plain case) are each written out
in full, so they spell out the same due rows twice: the same columns, decoded by the same
``due_job``, and the same filter. The scheduler flags' words are in the SQL of both and of
``OUTLOOK``, and in ``flag_value``. A change to one that misses the other fails here.
"""

from __future__ import annotations

import re

from daemon.pg.store.postgres.rows import FALSE_WORDS, TRUE_WORDS
from daemon.pg.store.queries.claim import CLAIM_PLAIN, OUTLOOK, SELECT_DUE


def _flat(sql: str) -> str:
    return " ".join(sql.split())


def _between(sql: str, start: str, end: str) -> str:
    flat = _flat(sql)
    begin = flat.index(start)
    return flat[begin : flat.index(end, begin) + len(end)]


def test_the_plain_claim_reads_the_columns_the_planners_path_reads() -> None:
    columns = _between(SELECT_DUE, "id, name, task_type", "lease_owner, current_run_id")
    assert columns in _flat(CLAIM_PLAIN)


def test_the_plain_claim_locks_the_rows_the_planners_path_locks() -> None:
    rows = _between(SELECT_DUE, "FROM scheduled_jobs WHERE enabled", "FOR UPDATE SKIP LOCKED")
    assert rows in _flat(CLAIM_PLAIN)


def test_the_flag_words_are_the_same_in_sql_and_python() -> None:
    for sql in (SELECT_DUE, CLAIM_PLAIN, OUTLOOK):
        flat = _flat(sql)
        for key, words in (("paused", TRUE_WORDS), ("enabled", FALSE_WORDS)):
            found = re.findall(
                rf"key = 'scheduler\.{key}' AND lower\(value #>> '{{}}'\) IN \(([^)]*)\)", flat
            )
            assert found, (key, sql)
            for listed in found:
                assert {w.strip(" '") for w in listed.split(",")} == words
