-- The job change log. Every job write takes the next job_revision.revision in its
-- transaction and stamps it on the rows it writes; a deletion leaves a tombstone with it. The
-- counter's row lock orders the writers, so once an engine sees revision R, every change up
-- to R is visible: it reads only the jobs with revision > R and the tombstones after R,
-- instead of every job.
ALTER TABLE job_definition
    ADD COLUMN revision BIGINT NOT NULL DEFAULT 0 COMMENT 'job_revision.revision of the last write',
    ADD KEY idx_job_revision (revision);

-- Deleted jobs, by the revision that deleted them. Pruned after a while by the writers.
CREATE TABLE job_tombstone (
    revision   BIGINT       NOT NULL,
    name       VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    deleted_at DATETIME(3)  NOT NULL,
    PRIMARY KEY (revision, name),
    KEY idx_tombstone_deleted (deleted_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'deleted jobs, for incremental reloads';

-- Tombstones up to this revision may have been pruned: an engine behind it reloads every job.
ALTER TABLE job_revision ADD COLUMN pruned_revision BIGINT NOT NULL DEFAULT 0;
