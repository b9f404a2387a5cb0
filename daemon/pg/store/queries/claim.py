"""The runner's claim: the statements that find due jobs and lease them, and the look ahead.

The due condition and ORDER BY match ``scheduled_jobs_due_idx``, so finding due rows is an
index range scan whatever the table's size. Each statement is built at import from fragments
written once, shared with the planner where it decides the same case.
"""

from daemon.pg.store.plain_case import plain_sql
from daemon.pg.store.scheduler_flags import (
    BLANKS,
    ENABLED_KEY,
    FALSE_WORDS,
    INTERVAL_KEY,
    PAUSED_KEY,
    TRUE_WORDS,
)


def _text(value: str) -> str:
    """A constant as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _one_of(words: tuple[str, ...]) -> str:
    return ", ".join(_text(word) for word in words)


# A settings value's text as a flag reads it: trimmed of BLANKS, lowered.
FLAG_TEXT = "lower(btrim(value #>> '{}', " + " || ".join(f"chr({ord(c)})" for c in BLANKS) + "))"


# A settings row that stops claiming: paused, or the scheduler disabled.
_NOT_CLAIMING = f"""SELECT 1 FROM runbroker_settings
    WHERE (key = {_text(PAUSED_KEY)} AND {FLAG_TEXT} IN ({_one_of(TRUE_WORDS)}))
       OR (key = {_text(ENABLED_KEY)} AND {FLAG_TEXT} IN ({_one_of(FALSE_WORDS)}))"""  # noqa: S608 (built from the constants above)

# A due row's columns: times clamped to the years 1-9999 Python's datetime holds, as integers,
# so that a row written by hand with '-infinity', 'infinity' or a date BC cannot fail the claim
# of every row in its batch (no statement here returns a raw timestamp column).
_DUE_COLUMNS = """id, name, task_type, payload::text AS payload, schedule, time_zone,
    (extract(epoch FROM greatest(next_run_at, timestamptz '0001-01-01 00:00:00+00'))
     * 1000000)::int8 AS next_run_us,
    (extract(epoch FROM CASE WHEN scheduled_for IS NOT NULL THEN least(greatest(
        scheduled_for, timestamptz '0001-01-01 00:00:00+00'), timestamptz '9999-12-31 00:00:00+00')
     END) * 1000000)::int8 AS scheduled_for_us, attempt,
    max_attempts, misfire, nullif(depends_on, '[]'::jsonb)::text AS depends_on,
    needs_schedule, lease_owner, current_run_id"""

# The due rows, locked: enabled, due, not leased, the scheduler neither paused nor disabled.
# At most $1, in the order they fell due.
_DUE_ROWS = f"""FROM scheduled_jobs
WHERE enabled AND next_run_at <= now()
  AND (lease_expires_at IS NULL OR lease_expires_at <= now())
  AND NOT EXISTS ({_NOT_CLAIMING})
ORDER BY next_run_at
LIMIT $1
FOR UPDATE SKIP LOCKED"""

# The planner's path: lock the due rows, plan each in Python, then CLAIM, in one transaction.
SELECT_DUE = f"""
SELECT {_DUE_COLUMNS},
    (extract(epoch FROM now()) * 1000000)::int8 AS db_now_us
{_DUE_ROWS}
"""  # noqa: S608 (built from the constants above)

# The plain case in one statement (``plain_case.PLAIN_CASE``, $4 the misfire grace in seconds):
# a run for (next_run_at, attempt 1), the job leased, nothing else changed. Every due row it
# locked comes back, and those without a run_id are left to the planner.
CLAIM_PLAIN = f"""
WITH due AS MATERIALIZED (
    SELECT {_DUE_COLUMNS}, next_run_at,
    {plain_sql(grace_s="$4")} AS plain
{_DUE_ROWS}
), runs AS (
    INSERT INTO job_runs (id, job_id, scheduled_for, attempt, status, owner)
    SELECT nextval('job_runs_id_seq'::regclass), id, next_run_at, 1, 'queued', $2
    FROM due WHERE plain
    RETURNING id, job_id
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = $2, lease_expires_at = now() + $3 * interval '1 second',
        current_run_id = runs.id, scheduled_for = s.next_run_at, attempt = 1,
        updated_at = now()
    FROM runs
    WHERE s.id = ANY(ARRAY(SELECT job_id FROM runs)) AND s.id = runs.job_id
)
SELECT due.id, due.name, due.task_type, due.payload, due.schedule, due.time_zone,
    due.next_run_us, due.scheduled_for_us, due.attempt, due.max_attempts, due.misfire,
    due.depends_on, due.needs_schedule, due.lease_owner, due.current_run_id, runs.id AS run_id
FROM due LEFT JOIN runs ON runs.job_id = due.id
"""  # noqa: S608 (built from the constants above)

# A claim's plans applied in one statement of the claim's transaction: record the occurrences
# passed over (a row of attempt 0 per plan that passes some: a claim made again after a release
# replaces it), abandon the expired runs, insert the new run rows, then lease or reschedule the
# jobs. The plans come as one JSON array of arrays (``plans_json``), because asyncpg encodes one
# JSON text far more cheaply than ten typed arrays. The jobs are fetched by primary key, so the
# plan stays linear in the batch.
CLAIM = """
WITH p AS MATERIALIZED (
    SELECT (e->>0)::bigint AS job_id, (e->>1)::bool AS run,
           timestamptz 'epoch' + (e->>2)::bigint * interval '1 microsecond' AS scheduled_for,
           (e->>3)::int AS attempt,
           timestamptz 'epoch' + (e->>4)::bigint * interval '1 microsecond' AS next_run_at,
           (e->>5)::bool AS enabled, e->>6 AS last_status, e->>7 AS last_error,
           (e->>8)::bigint AS abandon_run_id, e->>9 AS abandon_error,
           CASE WHEN (e->>1)::bool THEN nextval('job_runs_id_seq'::regclass) END AS run_id,
           e->>10 AS passed_status,
           timestamptz 'epoch' + (e->>11)::bigint * interval '1 microsecond' AS passed_first,
           (e->>12)::int AS passed_count, e->>13 AS passed_note
    FROM jsonb_array_elements($1::text::jsonb) AS e
), passed AS (
    INSERT INTO job_runs AS r (job_id, scheduled_for, attempt, status, occurrences, owner,
                               finished_at, error)
    SELECT p.job_id, p.passed_first, 0, p.passed_status, p.passed_count, $2, now(), p.passed_note
    FROM p WHERE p.passed_status IS NOT NULL
    ON CONFLICT (job_id, scheduled_for, attempt) DO UPDATE SET
        status = excluded.status, occurrences = excluded.occurrences, owner = excluded.owner,
        claimed_at = now(), finished_at = now(), error = excluded.error
), abandoned AS (
    UPDATE job_runs r SET status = 'abandoned', finished_at = now(), error = p.abandon_error
    FROM p
    WHERE r.id = ANY(ARRAY(SELECT abandon_run_id FROM p WHERE abandon_error IS NOT NULL))
      AND r.id = p.abandon_run_id AND p.abandon_error IS NOT NULL
      AND r.status IN ('queued', 'running')
), runs AS (
    INSERT INTO job_runs (id, job_id, scheduled_for, attempt, status, owner)
    SELECT p.run_id, p.job_id, p.scheduled_for, p.attempt, 'queued', $2 FROM p WHERE p.run
    RETURNING id, job_id
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = CASE WHEN p.run THEN $2 END,
        lease_expires_at = CASE WHEN p.run THEN now() + $3 * interval '1 second' END,
        current_run_id = p.run_id,
        scheduled_for = p.scheduled_for,
        attempt = p.attempt,
        next_run_at = CASE WHEN p.run THEN s.next_run_at ELSE p.next_run_at END,
        following_run_at = CASE WHEN p.run THEN s.following_run_at END,
        needs_schedule = p.run AND s.needs_schedule,
        enabled = p.enabled,
        last_status = coalesce(p.last_status, s.last_status),
        last_error = CASE WHEN p.run THEN s.last_error ELSE p.last_error END,
        updated_at = now()
    FROM p
    WHERE s.id = ANY(ARRAY(SELECT job_id FROM p)) AND s.id = p.job_id
)
SELECT job_id, id AS run_id FROM runs
"""

# The claim loop's one look per wake-up: the flags, and how soon the earliest job is due (the
# first unleased next_run_at, or the earliest lease expiry). The loop looks only after a claim
# that was not full, so what it scans past is hardly more than the runs in flight.
OUTLOOK = f"""
SELECT
    (SELECT value FROM runbroker_settings WHERE key = {_text(PAUSED_KEY)}) AS paused,
    (SELECT value FROM runbroker_settings WHERE key = {_text(ENABLED_KEY)}) AS enabled,
    (SELECT value FROM runbroker_settings WHERE key = {_text(INTERVAL_KEY)}) AS interval_s,
    CASE WHEN NOT EXISTS ({_NOT_CLAIMING})
    THEN extract(epoch FROM least(
        (SELECT next_run_at FROM scheduled_jobs
         WHERE enabled AND next_run_at < timestamptz 'infinity' AND lease_owner IS NULL
         ORDER BY next_run_at LIMIT 1),
        (SELECT min(lease_expires_at) FROM scheduled_jobs
         WHERE enabled AND next_run_at <= now() AND lease_owner IS NOT NULL)) - now())::float8
    END AS due_in_s
"""  # noqa: S608 (built from the constants above)
