-- The job change log: every job write stamps the revision it took from job_revision on its
-- rows, and a deletion leaves a tombstone, so an engine reads only what changed after the
-- revision it has (see the MySQL migration of the same name).
ALTER TABLE job_definition ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
CREATE INDEX idx_job_revision ON job_definition (revision);

CREATE TABLE job_tombstone (
    revision   INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    deleted_at TEXT    NOT NULL,
    PRIMARY KEY (revision, name)
);
CREATE INDEX idx_tombstone_deleted ON job_tombstone (deleted_at);

-- Tombstones up to this revision may have been pruned: an engine behind it reloads every job.
ALTER TABLE job_revision ADD COLUMN pruned_revision INTEGER NOT NULL DEFAULT 0;
