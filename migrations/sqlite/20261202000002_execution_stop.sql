-- Runs cancelled while their handler may still go on at the executor: one row each until
-- the executor confirms the stop (or the run's timeout has long passed). Guarded admission
-- (overlap SKIP and COVER) counts them as runs of their job.
CREATE TABLE execution_stop (
    trace_id     TEXT NOT NULL PRIMARY KEY,
    job_name     TEXT NOT NULL,
    requested_at TEXT NOT NULL
);
CREATE INDEX idx_stop_job ON execution_stop (job_name);
