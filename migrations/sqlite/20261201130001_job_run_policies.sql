-- How a job runs in production (SPEC §13): executor routing, overlapping fires, child jobs
-- triggered after a successful fire, and the alert channels of the job.
ALTER TABLE job_definition ADD COLUMN route_strategy TEXT NOT NULL DEFAULT 'ROUND_ROBIN';
ALTER TABLE job_definition ADD COLUMN overlap_policy TEXT NOT NULL DEFAULT 'ALLOW';
-- JSON arrays; NULL = none (child_jobs) or alerts.default_channels (alert_channels).
ALTER TABLE job_definition ADD COLUMN child_jobs TEXT;
ALTER TABLE job_definition ADD COLUMN alert_channels TEXT;
