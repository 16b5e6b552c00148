-- Runs cancelled while their handler may still go on at the executor: one row each until
-- the executor confirms the stop (or the run's timeout has long passed). Guarded admission
-- (overlap SKIP and COVER) counts them as runs of their job.
CREATE TABLE execution_stop (
    trace_id     VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    job_name     VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    requested_at DATETIME(3)  NOT NULL,
    KEY idx_stop_job (job_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
