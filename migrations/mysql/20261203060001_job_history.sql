-- Every write of a job definition, by the revision it took: a fire is judged against the
-- definition in force at its instant, and that needs every change since the fire was planned,
-- not only the last one (an edit before the instant, then a disable after it, must withdraw
-- the fire). Deletions are in job_tombstone. Pruned with the tombstones' age.
CREATE TABLE job_history (
    revision   BIGINT       NOT NULL,
    name       VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    changed_at DATETIME(3)  NOT NULL,
    PRIMARY KEY (revision, name),
    KEY idx_history_name (name, revision),
    KEY idx_history_changed (changed_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'job writes, for judging fires at their instant';
