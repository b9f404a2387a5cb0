-- Claims and heartbeats become heap-only (HOT) updates: no index entries written.
--
-- Until now the due index was on coalesce(lease_expires_at, next_run_at), so every claim and
-- every heartbeat changed an indexed column and rewrote all three scheduled_jobs indexes.
-- The index is now on next_run_at alone (still partial on enabled). A claim that runs the job
-- keeps next_run_at (the occurrence, <= now) and changes only lease and run columns, which no
-- index covers; with free space on the page (fillfactor) the new row version stays on the
-- page and no index is touched.
--
-- The due query stays an index range scan: next_run_at <= now() in index order, with
-- "lease absent or expired" as a filter. A leased row always has next_run_at <= its claim
-- time, so the rows the filter skips are the runs in flight right now (bounded by the
-- replicas' queues), not the table's size.
DROP INDEX scheduled_jobs_due_idx;
CREATE INDEX scheduled_jobs_due_idx ON scheduled_jobs (next_run_at) WHERE enabled;

-- Room for the claim's and the heartbeat's new row versions on the same page; job_runs gets
-- room for its finish (no job_runs index covers a column the finish writes).
ALTER TABLE scheduled_jobs SET (fillfactor = 50);
ALTER TABLE job_runs SET (fillfactor = 70);
