-- Every write of a job definition, by the revision it took (see the MySQL migration of the
-- same name).
CREATE TABLE job_history (
    revision   INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    changed_at TEXT    NOT NULL,
    PRIMARY KEY (revision, name)
);
CREATE INDEX idx_history_name ON job_history (name, revision);
CREATE INDEX idx_history_changed ON job_history (changed_at);
