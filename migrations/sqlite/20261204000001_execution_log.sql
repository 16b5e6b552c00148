-- Handler logs by execution (see the MySQL migration of the same name).
CREATE TABLE job_execution_log (
    trace_id TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    at       TEXT    NOT NULL,
    level    TEXT    NOT NULL,
    message  TEXT    NOT NULL,
    PRIMARY KEY (trace_id, seq)
);

CREATE TABLE job_execution_log_end (
    trace_id      TEXT    NOT NULL PRIMARY KEY,
    line_count    INTEGER NOT NULL,
    dropped_bytes INTEGER NOT NULL,
    at            TEXT    NOT NULL
);
