-- A job's row is locked by writing it (src/store/steps.rs, `lock_job_rows`); see the MySQL
-- migration of the same name.
ALTER TABLE job_definition ADD COLUMN lock_seq INTEGER NOT NULL DEFAULT 0;
