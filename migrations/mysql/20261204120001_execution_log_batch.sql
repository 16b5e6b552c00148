-- Handler logs stored a batch to a row (src/store/logs.rs): a row per line cost an index
-- entry, a row header and a bound value per line, more than the fires themselves at a
-- thousand executions a second (docs/benchmarks.md, "Execution logs"). Executors ship an
-- execution's lines in order, so what is stored of a log is its lines up to some seq, and a
-- batch keeps only the lines past it. The lines stored one to a row are carried over.
CREATE TABLE job_execution_log_batch (
    trace_id  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    last_seq  BIGINT      NOT NULL COMMENT 'seq of the batch''s last line',
    first_seq BIGINT      NOT NULL COMMENT 'seq of its first line',
    body      MEDIUMTEXT  NOT NULL COMMENT 'JSON [[seq, at (Unix ms, executor clock), level, message], ...]',
    PRIMARY KEY (trace_id, last_seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'handler logs by execution, a shipped batch to a row';

INSERT INTO job_execution_log_batch (trace_id, last_seq, first_seq, body)
SELECT trace_id, seq, seq,
       JSON_ARRAY(JSON_ARRAY(seq, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', at) DIV 1000,
                             level, message))
FROM job_execution_log;

DROP TABLE job_execution_log;
