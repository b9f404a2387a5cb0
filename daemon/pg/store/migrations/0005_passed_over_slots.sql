-- Occurrences a claim passes over get a job_runs row of their own, beside the runs.
--
-- A job whose occurrences passed while no replica ran it (or whose run outlasted its
-- interval) runs once, as its misfire says: `coalesce` runs the latest and passes over the
-- ones before it, `skip` passes over all of them. The claim now records what it passed over
-- in its own transaction: one row per claim, status `coalesced` or `missed`, scheduled_for
-- the first occurrence passed over, `occurrences` how many (capped by the runner's count; the
-- row's error column then says "at least"), finished_at the claim's time (pruned as any run).
--
-- Such a row has attempt 0: it was never attempted, and its key (job_id, scheduled_for, 0)
-- can meet no run's. A claim made again for the same occurrences (its run released at a
-- shutdown before it started) replaces the row instead of adding one.
--
-- Every row already there satisfies the new checks (the old statuses, attempt 1 and up, one
-- occurrence each): NOT VALID spares a scan of a large job_runs, and PostgreSQL still checks
-- every row written from now on. The new column has a constant default: no rewrite either.
ALTER TABLE job_runs
    DROP CONSTRAINT job_runs_status_check,
    DROP CONSTRAINT job_runs_attempt_check,
    ADD COLUMN occurrences integer NOT NULL DEFAULT 1,
    ADD CONSTRAINT job_runs_status_check CHECK (
        status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'abandoned',
                   'coalesced', 'missed')
    ) NOT VALID,
    ADD CONSTRAINT job_runs_attempt_check CHECK (
        CASE WHEN status IN ('coalesced', 'missed') THEN attempt = 0 ELSE attempt >= 1 END
    ) NOT VALID,
    ADD CONSTRAINT job_runs_occurrences_check CHECK (occurrences >= 1) NOT VALID;
