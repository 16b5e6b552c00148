-- How a job runs in production (SPEC §13): executor routing, overlapping fires, child jobs
-- triggered after a successful fire, and the alert channels of the job.
ALTER TABLE job_definition
    ADD COLUMN route_strategy VARCHAR(20) NOT NULL DEFAULT 'ROUND_ROBIN' COMMENT 'ROUND_ROBIN | FIRST | RANDOM | CONSISTENT_HASH | LEAST_BUSY',
    ADD COLUMN overlap_policy VARCHAR(10) NOT NULL DEFAULT 'ALLOW' COMMENT 'ALLOW | SKIP | COVER',
    ADD COLUMN child_jobs     TEXT        NULL COMMENT 'JSON array of job names; NULL = none',
    ADD COLUMN alert_channels TEXT        NULL COMMENT 'JSON array of alert channel names; NULL = alerts.default_channels';
