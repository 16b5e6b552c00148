-- A job's row is locked by writing it (src/store/steps.rs, `lock_job_rows`): on a Galera
-- cluster only the rows a transaction changes are certified across nodes, so a lock that
-- changed nothing held only on the node that took it.
ALTER TABLE job_definition
    ADD COLUMN lock_seq BIGINT NOT NULL DEFAULT 0 COMMENT 'bumped by every transaction that locks the job''s row';
