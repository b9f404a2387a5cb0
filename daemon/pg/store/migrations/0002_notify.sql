-- Wake-ups: every replica LISTENs on channel `runbroker`. The payload says what changed.
-- Identical notifications in one transaction are delivered once, so a batch costs one.

CREATE FUNCTION runbroker_jobs_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.next_run_at IS NULL THEN
            NEW.needs_schedule := true;
            NEW.next_run_at := now();
        END IF;
    ELSIF (NEW.schedule IS DISTINCT FROM OLD.schedule OR NEW.time_zone IS DISTINCT FROM OLD.time_zone)
          AND NEW.next_run_at IS NOT DISTINCT FROM OLD.next_run_at THEN
        -- A schedule edited by hand: recompute next_run_at. A leased job is recomputed when
        -- its run finishes (the finish sees needs_schedule).
        NEW.needs_schedule := true;
        IF NEW.lease_owner IS NULL THEN
            NEW.next_run_at := now();
            NEW.scheduled_for := NULL;
            NEW.attempt := 0;
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

-- Only on INSERT and on updates that SET schedule or time_zone: runner updates never pay.
CREATE TRIGGER scheduled_jobs_before_write
    BEFORE INSERT OR UPDATE OF schedule, time_zone ON scheduled_jobs
    FOR EACH ROW EXECUTE FUNCTION runbroker_jobs_before_write();

CREATE FUNCTION runbroker_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runbroker', 'jobs');
    RETURN NULL;
END;
$$;

-- Inserts, and updates that change when or whether a job runs, or release a lease (a run
-- finished: dependants may go on). Claims and heartbeats do not notify. Statement-level with
-- transition tables: one check per statement, however many rows it touched.
CREATE FUNCTION runbroker_notify_job_updates() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE o.next_run_at IS DISTINCT FROM n.next_run_at
           OR o.enabled IS DISTINCT FROM n.enabled
           OR (o.lease_owner IS NOT NULL AND n.lease_owner IS NULL)
    ) THEN
        PERFORM pg_notify('runbroker', 'jobs');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER scheduled_jobs_notify_insert
    AFTER INSERT ON scheduled_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION runbroker_notify_jobs();

CREATE TRIGGER scheduled_jobs_notify_update
    AFTER UPDATE ON scheduled_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION runbroker_notify_job_updates();

CREATE FUNCTION runbroker_notify_settings() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runbroker', 'settings');
    RETURN NULL;
END;
$$;

CREATE TRIGGER runbroker_settings_notify
    AFTER INSERT OR UPDATE OR DELETE ON runbroker_settings
    FOR EACH STATEMENT EXECUTE FUNCTION runbroker_notify_settings();
