-- Schedule types (docs/api.md, "Schedule types"): CRON jobs keep their cron; FIXED_RATE jobs fire
-- every interval_seconds from start_at; ONCE jobs at start_at; NONE jobs only when triggered.
-- cron is NULL for every type but CRON.
ALTER TABLE job_definition
    ADD COLUMN schedule_type VARCHAR(16) NOT NULL DEFAULT 'CRON'
        COMMENT 'CRON | FIXED_RATE | ONCE | NONE',
    ADD COLUMN interval_seconds INT NULL COMMENT 'FIXED_RATE: seconds between instants',
    ADD COLUMN start_at DATETIME(3) NULL COMMENT 'FIXED_RATE: the first instant; ONCE: the instant',
    MODIFY COLUMN cron VARCHAR(100) NULL;
