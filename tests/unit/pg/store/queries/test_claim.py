"""The store's statements take each rule from its one home, and none is restated by hand.

``SELECT_DUE`` (the planner's path) and ``CLAIM_PLAIN`` (the plain case) read the same due rows
(one fragment of columns and filter); the scheduler flags' words in the SQL of both and of
``OUTLOOK`` are ``scheduler_flags``'s; the ``plain`` column is ``PLAIN_CASE`` rendered. A
statement rewritten with a copy of its own fails here.
"""

from __future__ import annotations

import re

from daemon.pg.store.plain_case import plain_sql
from daemon.pg.store.queries.claim import CLAIM_PLAIN, FLAG_TEXT, OUTLOOK, SELECT_DUE
from daemon.pg.store.scheduler_flags import ENABLED_KEY, FALSE_WORDS, PAUSED_KEY, TRUE_WORDS


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


def test_the_flag_words_in_sql_are_the_pythons() -> None:
    for sql in (SELECT_DUE, CLAIM_PLAIN, OUTLOOK):
        flat = _flat(sql)
        for key, words in ((PAUSED_KEY, TRUE_WORDS), (ENABLED_KEY, FALSE_WORDS)):
            found = re.findall(
                rf"key = '{re.escape(key)}' AND {re.escape(FLAG_TEXT)} IN \(([^)]*)\)", flat
            )
            assert found, (key, sql)
            for listed in found:
                assert [w.strip(" '") for w in listed.split(",")] == list(words)


def test_the_plain_column_is_the_plain_case_rendered() -> None:
    plain = _flat(plain_sql(grace_s="$4"))
    assert f"{plain} AS plain" in _flat(CLAIM_PLAIN)
    assert "following_run_at > now()" in plain  # the fact the SQL reads from its own column
