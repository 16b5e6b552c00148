-- Handler logs stored a batch to a row (see the MySQL migration of the same name).
CREATE TABLE job_execution_log_batch (
    trace_id  TEXT    NOT NULL,
    last_seq  INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    body      TEXT    NOT NULL,
    PRIMARY KEY (trace_id, last_seq)
);

INSERT INTO job_execution_log_batch (trace_id, last_seq, first_seq, body)
SELECT trace_id, seq, seq,
       json_array(json_array(seq, CAST(ROUND((julianday(at) - 2440587.5) * 86400000.0) AS INTEGER),
                             level, message))
FROM job_execution_log;

DROP TABLE job_execution_log;
