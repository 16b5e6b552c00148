-- When a job was last switched on. Fires scheduled while a job was disabled are not owed to
-- it when it is enabled again; other edits do not reset this (they must not cancel a
-- catch-up owed after a failover).
ALTER TABLE job_definition ADD COLUMN enabled_since DATETIME(3) NULL;
UPDATE job_definition SET enabled_since = updated_at;
