"""The runner's other statements: leases kept, run records written, dependencies, pruning.

FINISH and RELEASE are guarded by the lease: a record is written only while the job is still
leased by this replica for that very run.
"""

# The LISTEN connection's liveness check.
PING = "SELECT 1"

HEARTBEAT = """
UPDATE scheduled_jobs SET lease_expires_at = now() + $3 * interval '1 second'
WHERE id = ANY($1::bigint[]) AND lease_owner = $2
RETURNING id
"""

# Which of the jobs whose leases a heartbeat did not renew are still there: the others were
# removed (deleted by hand or `runbroker jobs remove`) while their runs were held.
JOBS_PRESENT = "SELECT id FROM scheduled_jobs WHERE id = ANY($1::bigint[])"

MARK_STARTED = """
UPDATE job_runs r SET status = 'running', started_at = x.started_at
FROM unnest($1::bigint[], $2::timestamptz[]) AS x(id, started_at)
WHERE r.id = ANY($1::bigint[]) AND r.id = x.id AND r.status = 'queued' AND r.owner = $3
"""

# A finish is written only while the job is still leased by us for this very run. It notifies
# when it released a job (migration 0004 leaves finishes to it), so that dependants go on and
# every replica's timer learns the new next_run_at. The batch is one JSON array of arrays
# (``finishes_json``). The owner comes in as a column of each element, a join condition rather
# than a filter, because the planner's estimate of a filter on it made the plan rescan the
# batch for every row.
FINISH = """
WITH f AS MATERIALIZED (
    SELECT (e->>0)::bigint AS job_id, (e->>1)::bigint AS run_id, e->>2 AS status,
           timestamptz 'epoch' + (e->>3)::bigint * interval '1 microsecond' AS started_at,
           timestamptz 'epoch' + (e->>4)::bigint * interval '1 microsecond' AS finished_at,
           e->5 AS output, e->>6 AS error,
           timestamptz 'epoch' + (e->>7)::bigint * interval '1 microsecond' AS next_run_at,
           (e->>8)::float8 AS retry_in_s,
           timestamptz 'epoch' + (e->>9)::bigint * interval '1 microsecond' AS scheduled_for,
           (e->>10)::int AS attempt, e->>11 AS owner,
           CASE e->>12 WHEN 'infinity' THEN timestamptz 'infinity'
               ELSE timestamptz 'epoch' + (e->>12)::bigint * interval '1 microsecond'
           END AS following_run_at
    FROM jsonb_array_elements($1::text::jsonb) AS e
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = NULL, lease_expires_at = NULL, current_run_id = NULL,
        next_run_at = CASE
            WHEN s.needs_schedule THEN now()
            WHEN f.retry_in_s IS NOT NULL THEN now() + f.retry_in_s * interval '1 second'
            ELSE f.next_run_at END,
        following_run_at = CASE
            WHEN s.needs_schedule OR f.retry_in_s IS NOT NULL THEN NULL
            ELSE f.following_run_at END,
        scheduled_for = CASE WHEN s.needs_schedule THEN NULL ELSE f.scheduled_for END,
        attempt = CASE WHEN s.needs_schedule THEN 0 ELSE f.attempt END,
        last_run_at = f.finished_at, last_status = f.status, last_error = f.error,
        updated_at = now()
    FROM f
    WHERE s.id = ANY(ARRAY(SELECT job_id FROM f)) AND s.id = f.job_id
      AND s.current_run_id = f.run_id AND s.lease_owner = f.owner
    RETURNING f.run_id, f.status, f.started_at, f.finished_at, f.output, f.error,
        pg_notify('runbroker', 'jobs')  -- once per transaction, however many rows call it
), runs AS (
    UPDATE job_runs r SET
        status = jobs.status, started_at = coalesce(r.started_at, jobs.started_at),
        finished_at = jobs.finished_at, output = nullif(jobs.output, 'null'::jsonb),
        error = jobs.error
    FROM jobs
    WHERE r.id = jobs.run_id
    RETURNING r.id
)
SELECT id AS run_id FROM runs
"""

# A claimed run that never started: the job goes back as it was before the claim.
RELEASE = """
WITH x AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS x(job_id, run_id)
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = NULL, lease_expires_at = NULL, current_run_id = NULL,
        attempt = greatest(s.attempt - 1, 0),
        scheduled_for = CASE WHEN s.attempt <= 1 THEN NULL ELSE s.scheduled_for END,
        next_run_at = CASE WHEN s.needs_schedule THEN now() ELSE s.next_run_at END,
        updated_at = now()
    FROM x
    WHERE s.id = ANY($1::bigint[]) AND s.id = x.job_id AND s.current_run_id = x.run_id
      AND s.lease_owner IS NOT DISTINCT FROM $3
    RETURNING x.run_id
)
DELETE FROM job_runs r USING jobs WHERE r.id = ANY($2::bigint[]) AND r.id = jobs.run_id
RETURNING r.id AS run_id
"""


# pending: a run in flight, a retry, or an occurrence due at or before the dependant's.
DEPENDENCY_STATES = """
SELECT name, last_status,
       (lease_owner IS NOT NULL
        OR (scheduled_for IS NOT NULL AND scheduled_for <= $2)
        OR (enabled AND next_run_at <= $2)) AS pending
FROM scheduled_jobs WHERE name = ANY($1::text[])
"""

PRUNE = """
WITH old AS (
    SELECT id FROM job_runs
    WHERE claimed_at < now() - $1 * interval '1 second'
      AND finished_at < now() - $1 * interval '1 second'
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM job_runs r USING old WHERE r.id = old.id RETURNING 1
)
SELECT count(*) FROM gone
"""
