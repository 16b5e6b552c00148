-- Backfills: a job's past instants between two times, run again on request. The cursor
-- (next_time, done) moves in the transaction that records the instants' rows, so an instant
-- is recorded once whoever runs the backfill and whenever it dies.
CREATE TABLE job_backfill (
    job_name       VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    backfill_id    VARCHAR(64)  NOT NULL COMMENT 'the client''s key, or a generated one',
    from_time      DATETIME(3)  NOT NULL,
    to_time        DATETIME(3)  NOT NULL COMMENT 'exclusive',
    max_per_second INT          NOT NULL,
    fires          INT          NOT NULL COMMENT 'instants of the schedule in [from_time, to_time)',
    done           INT          NOT NULL DEFAULT 0 COMMENT 'instants recorded so far',
    next_time      DATETIME(3)  NULL     COMMENT 'the next instant to record; null once all are',
    status         VARCHAR(16)  NOT NULL COMMENT 'RUNNING | DONE | CANCELLED',
    created_at     DATETIME(3)  NOT NULL,
    created_by     VARCHAR(100) NULL,
    updated_at     DATETIME(3)  NOT NULL,
    PRIMARY KEY (job_name, backfill_id),
    KEY idx_backfill_status (status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'backfills of past instants';
