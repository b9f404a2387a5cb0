-- Less work per run for the database, the same guarantees.
--
-- 1. job_runs.job_id loses its foreign key; deleting or truncating jobs still takes their runs
--    with them (triggers below). The key's check ran a lookup and a row lock on scheduled_jobs
--    for every run inserted, and the only writer of job_runs, the runner's claim, inserts a
--    run in the very transaction that holds its job's row locked (FOR UPDATE): the job is
--    there and cannot go away before the run is committed. A job deleted by hand while its
--    run is being claimed waits for that lock, and its cascade then sees the new run.
ALTER TABLE job_runs DROP CONSTRAINT job_runs_job_id_fkey;

CREATE FUNCTION runbroker_delete_job_runs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_runs r USING gone_jobs g WHERE r.job_id = g.id;
    RETURN NULL;
END;
$$;

-- Statement-level: one delete of runs however many jobs went (found by job_id through the
-- unique key on (job_id, scheduled_for, attempt)).
CREATE TRIGGER scheduled_jobs_delete_runs
    AFTER DELETE ON scheduled_jobs
    REFERENCING OLD TABLE AS gone_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION runbroker_delete_job_runs();

CREATE FUNCTION runbroker_truncate_job_runs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_runs;
    RETURN NULL;
END;
$$;

CREATE TRIGGER scheduled_jobs_truncate_runs
    AFTER TRUNCATE ON scheduled_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION runbroker_truncate_job_runs();

-- 2. Job changes notify through a row trigger whose WHEN clause the executor checks in C: no
--    longer a statement trigger with transition tables, which copied the old and the new
--    version of every row of every claim, heartbeat and finish to decide. Notified as before:
--    a change of next_run_at or enabled, or a lease released, by any writer, except the
--    runner's own finish (it sets last_run_at): that statement notifies once itself. A hand
--    edit that also sets last_run_at is silent; the replicas see it by the next poll.
DROP TRIGGER scheduled_jobs_notify_update ON scheduled_jobs;
DROP FUNCTION runbroker_notify_job_updates();

CREATE TRIGGER scheduled_jobs_notify_update
    AFTER UPDATE ON scheduled_jobs
    FOR EACH ROW
    WHEN ((OLD.next_run_at IS DISTINCT FROM NEW.next_run_at
           OR OLD.enabled IS DISTINCT FROM NEW.enabled
           OR (OLD.lease_owner IS NOT NULL AND NEW.lease_owner IS NULL))
          AND OLD.last_run_at IS NOT DISTINCT FROM NEW.last_run_at)
    EXECUTE FUNCTION runbroker_notify_jobs();

-- 3. The scheduling trigger (0002) is called only for the rows it changes: WHEN clauses the
--    executor checks in C, instead of a PL/pgSQL call for every row inserted (a bulk insert
--    of jobs with next_run_at set took 40 % longer) and every runner update of the schedule.
DROP TRIGGER scheduled_jobs_before_write ON scheduled_jobs;

CREATE TRIGGER scheduled_jobs_before_insert
    BEFORE INSERT ON scheduled_jobs
    FOR EACH ROW
    WHEN (NEW.next_run_at IS NULL)
    EXECUTE FUNCTION runbroker_jobs_before_write();

CREATE TRIGGER scheduled_jobs_before_update
    BEFORE UPDATE OF schedule, time_zone ON scheduled_jobs
    FOR EACH ROW
    WHEN ((NEW.schedule IS DISTINCT FROM OLD.schedule OR NEW.time_zone IS DISTINCT FROM OLD.time_zone)
          AND NEW.next_run_at IS NOT DISTINCT FROM OLD.next_run_at)
    EXECUTE FUNCTION runbroker_jobs_before_write();

-- 4. following_run_at: the schedule's occurrence after next_run_at, written by the runner's
--    finish and by `runbroker jobs add` with next_run_at; 'infinity' when there is none; NULL
--    when not known. With it a claim decides the plain case in SQL (a fresh occurrence, none
--    missed since: following_run_at is after now) and leases the job in the same statement.
--    Anything else goes through the runner's planner as before. Not indexed: the claim's
--    update stays heap-only.
ALTER TABLE scheduled_jobs ADD COLUMN following_run_at timestamptz;

-- Whoever moves next_run_at without saying what follows it (a hand edit, run-now) makes
-- following_run_at unknown again.
CREATE FUNCTION runbroker_forget_following() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.following_run_at := NULL;
    RETURN NEW;
END;
$$;

CREATE TRIGGER scheduled_jobs_forget_following
    BEFORE UPDATE OF next_run_at ON scheduled_jobs
    FOR EACH ROW
    WHEN (NEW.next_run_at IS DISTINCT FROM OLD.next_run_at
          AND NEW.following_run_at IS NOT NULL
          AND NEW.following_run_at IS NOT DISTINCT FROM OLD.following_run_at)
    EXECUTE FUNCTION runbroker_forget_following();

-- 5. Room on the page for a run's finish (and its start): with the rows filled to 45 % a
--    second version of each fits beside it, so the update is heap-only and touches no index.
--    At 70 % (0003) half the finishes of a burst wrote new entries into every job_runs index.
ALTER TABLE job_runs SET (fillfactor = 45);
