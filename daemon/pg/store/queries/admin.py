"""The statements of ``runbroker migrate`` and ``runbroker jobs``, and the channel they notify.

The triggers of the migrations and FINISH notify the same channel by name (``'runbroker'``).
"""

CHANNEL = "runbroker"  # what LISTEN listens to and every NOTIFY is sent on

# -- migrations -------------------------------------------------------------------------------
LOCK_MIGRATIONS = "SELECT pg_advisory_lock(hashtext('runbroker.migrate'))"
UNLOCK_MIGRATIONS = "SELECT pg_advisory_unlock(hashtext('runbroker.migrate'))"
CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS runbroker_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
SCHEMA_VERSION = "SELECT max(version) FROM runbroker_migrations"
APPLIED_MIGRATIONS = "SELECT version, name, checksum FROM runbroker_migrations ORDER BY version"
RECORD_MIGRATION = "INSERT INTO runbroker_migrations (version, name, checksum) VALUES ($1, $2, $3)"

# -- jobs commands ----------------------------------------------------------------------------
# A time a row can hold, as Python's datetime holds it: a row written by hand may hold a date
# BC or after 9999 (which the driver cannot decode) or +-infinity (which it decodes without a
# zone). Clamped to the years 1-9999, aware, and NULL kept NULL (a CASE: GREATEST and LEAST
# skip NULLs): the commands show the ends as -infinity/infinity (``daemon/pg/admin/times``).
_EARLIEST = "timestamptz '0001-01-01 00:00:00+00'"
_LATEST = "timestamptz '9999-12-31 23:59:59.999999+00'"


def _time(column: str, name: str) -> str:
    return (
        f"CASE WHEN {column} < {_EARLIEST} THEN {_EARLIEST} "
        f"WHEN {column} > {_LATEST} THEN {_LATEST} ELSE {column} END AS {name}"
    )


_JOB_COLUMNS = f"""id, name, task_type, payload, schedule, time_zone, enabled,
    {_time("next_run_at", "next_run_at")}, {_time("scheduled_for", "scheduled_for")}, attempt,
    max_attempts, misfire, depends_on, lease_owner,
    {_time("lease_expires_at", "lease_expires_at")}, {_time("last_run_at", "last_run_at")},
    last_status, last_error"""

DB_NOW = "SELECT now()"
NOTIFY_RUN_NOW = "SELECT pg_notify($1, 'run-now')"  # $1: CHANNEL

INSERT_JOB = f"""
INSERT INTO scheduled_jobs (name, task_type, payload, schedule, time_zone, enabled, next_run_at,
                            max_attempts, misfire, depends_on, following_run_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10::jsonb, $11)
RETURNING {_JOB_COLUMNS}
"""  # noqa: S608 (built from the constants above)
LOCK_JOB_NAMES = "SELECT name FROM scheduled_jobs WHERE name = ANY($1::text[]) FOR KEY SHARE"
LIST_JOBS = f"SELECT {_JOB_COLUMNS} FROM scheduled_jobs ORDER BY name"  # noqa: S608 (constants)
DELETE_JOB = "DELETE FROM scheduled_jobs WHERE name = $1 RETURNING id"
SET_ENABLED = f"""
UPDATE scheduled_jobs SET enabled = $2, updated_at = now() WHERE name = $1
RETURNING {_JOB_COLUMNS}
"""  # noqa: S608 (built from the constants above)
LOCK_JOB = "SELECT id, enabled, lease_owner FROM scheduled_jobs WHERE name = $1 FOR UPDATE"
RUN_NOW = f"""
UPDATE scheduled_jobs SET next_run_at = now(), updated_at = now() WHERE id = $1
RETURNING {_JOB_COLUMNS}
"""  # noqa: S608 (built from the constants above)
JOB_ID = "SELECT id FROM scheduled_jobs WHERE name = $1"
HISTORY = f"""
SELECT r.id, j.name AS job, {_time("r.scheduled_for", "scheduled_for")}, r.attempt, r.status,
       r.owner, {_time("r.claimed_at", "claimed_at")}, {_time("r.started_at", "started_at")},
       {_time("r.finished_at", "finished_at")}, r.error, r.output, j.time_zone AS tz,
       r.occurrences
FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id
WHERE $1::text IS NULL OR j.name = $1
ORDER BY r.id DESC
LIMIT $2
"""  # noqa: S608 (built from the constants above)

# A scheduler switch (keys in ``scheduler_flags``; ``jobs list`` reads them as the runner does,
# with OUTLOOK), written by ``jobs pause`` and ``jobs resume``. Writing one notifies every
# replica (migration 0002's trigger on runbroker_settings), so a pause holds from the next claim.
LOCK_SETTING = "SELECT value FROM runbroker_settings WHERE key = $1 FOR UPDATE"
SET_SETTING = """
INSERT INTO runbroker_settings (key, value, updated_at) VALUES ($1, $2::jsonb, now())
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()
"""
