-- Backfills (see the MySQL migration of the same name).
CREATE TABLE job_backfill (
    job_name       TEXT    NOT NULL,
    backfill_id    TEXT    NOT NULL,
    from_time      TEXT    NOT NULL,
    to_time        TEXT    NOT NULL,
    max_per_second INTEGER NOT NULL,
    fires          INTEGER NOT NULL,
    done           INTEGER NOT NULL DEFAULT 0,
    next_time      TEXT    NULL,
    status         TEXT    NOT NULL,
    created_at     TEXT    NOT NULL,
    created_by     TEXT    NULL,
    updated_at     TEXT    NOT NULL,
    PRIMARY KEY (job_name, backfill_id)
);
CREATE INDEX idx_backfill_status ON job_backfill (status);
