-- The Nacos group a job's executor service is registered in (NULL: the scheduler's
-- `nacos.group`), for teams that register their services in groups of their own.
ALTER TABLE job_definition ADD COLUMN service_group TEXT NULL;
