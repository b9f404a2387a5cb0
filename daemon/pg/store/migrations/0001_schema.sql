-- runbroker schema, version 1: scheduled jobs, their runs, and runtime settings.
-- Applied by `runbroker migrate` inside one transaction, under an advisory lock.

CREATE TABLE scheduled_jobs (
    id               bigserial PRIMARY KEY,
    name             text NOT NULL UNIQUE CHECK (name <> ''),
    task_type        text NOT NULL CHECK (task_type <> ''),
    payload          jsonb NOT NULL DEFAULT '{}'::jsonb,
    schedule         text NOT NULL,
    time_zone        text NOT NULL DEFAULT 'UTC',
    enabled          boolean NOT NULL DEFAULT true,
    -- When the runner should next look at the job: an occurrence or a retry time.
    -- NULL: nothing more to run (a one-shot that has run).
    next_run_at      timestamptz,
    -- Set by the database when a row is written by hand without next_run_at, or when its
    -- schedule changes: the next runner to see it computes next_run_at from the schedule.
    needs_schedule   boolean NOT NULL DEFAULT false,
    -- The occurrence being attempted or waiting for a retry (NULL between occurrences), and
    -- how many attempts it has had.
    scheduled_for    timestamptz,
    attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     integer CHECK (max_attempts >= 1),
    misfire          text NOT NULL DEFAULT 'coalesce' CHECK (misfire IN ('coalesce', 'skip')),
    -- [{"job": "name", "policy": "stop" | "skip"}, ...]
    depends_on       jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(depends_on) = 'array'),
    lease_owner      text,
    lease_expires_at timestamptz,
    current_run_id   bigint,
    last_run_at      timestamptz,
    last_status      text,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);

-- The due query: enabled jobs ordered by the time they next need a runner (an expired lease
-- or next_run_at). Partial, so disabled jobs cost nothing.
CREATE INDEX scheduled_jobs_due_idx
    ON scheduled_jobs ((coalesce(lease_expires_at, next_run_at)))
    WHERE enabled;

CREATE TABLE job_runs (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES scheduled_jobs (id) ON DELETE CASCADE,
    scheduled_for timestamptz NOT NULL,
    attempt       integer NOT NULL CHECK (attempt >= 1),
    status        text NOT NULL DEFAULT 'queued' CHECK (
        status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'abandoned')
    ),
    owner         text,
    claimed_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    output        jsonb,
    error         text,
    UNIQUE (job_id, scheduled_for, attempt)
);

-- Per-job history uses the unique key above (job_id first). Pruning goes by claimed_at, which
-- grows with the table: a BRIN index costs next to nothing to keep up.
CREATE INDEX job_runs_claimed_brin ON job_runs USING brin (claimed_at);

CREATE TABLE runbroker_settings (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO runbroker_settings (key, value) VALUES
    ('scheduler.paused', 'false'),
    ('scheduler.enabled', 'true'),
    ('scheduler.interval_seconds', 'null');
