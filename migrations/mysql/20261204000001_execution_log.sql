-- What handlers logged, per execution, as their executors shipped it (docs/api.md,
-- "Execution logs"). A line is keyed by the executor's own numbering, so a batch shipped
-- again after a lost answer writes nothing twice; readers page by it.
CREATE TABLE job_execution_log (
    trace_id VARCHAR(64)  NOT NULL,
    seq      BIGINT       NOT NULL COMMENT 'the line''s number in its execution, from 1',
    at       DATETIME(3)  NOT NULL COMMENT 'when the handler logged it (executor clock)',
    level    VARCHAR(8)   NOT NULL COMMENT 'TRACE | DEBUG | INFO | WARN | ERROR',
    message  TEXT         NOT NULL,
    PRIMARY KEY (trace_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'handler logs by execution';

-- The executor's last word on an execution's log: every line it kept has been shipped.
CREATE TABLE job_execution_log_end (
    trace_id      VARCHAR(64) NOT NULL PRIMARY KEY,
    line_count    BIGINT      NOT NULL COMMENT 'lines the executor kept and shipped',
    dropped_bytes BIGINT      NOT NULL COMMENT 'bytes past the executor''s bound, not kept',
    at            DATETIME(3) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'executions whose log is complete';
