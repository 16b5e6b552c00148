-- JobFlow schema for SQLite (embedded default). Times are UTC RFC 3339 text.

CREATE TABLE job_definition (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    name            TEXT    NOT NULL,
    service_name    TEXT    NOT NULL,
    handler         TEXT    NOT NULL,
    cron            TEXT    NOT NULL,
    timezone        TEXT    NOT NULL DEFAULT 'UTC',
    enabled         BOOLEAN NOT NULL DEFAULT 1,
    shard_count     INTEGER NOT NULL DEFAULT 1,
    shard_strategy  TEXT    NOT NULL DEFAULT 'MOD_HASH',
    shard_params    TEXT,
    job_params      TEXT,
    timeout_seconds INTEGER NOT NULL DEFAULT 300,
    max_retry       INTEGER NOT NULL DEFAULT 3,
    misfire_policy  TEXT    NOT NULL DEFAULT 'FIRE_ONCE_NOW',
    description     TEXT,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    created_by      TEXT,
    updated_by      TEXT,
    CONSTRAINT uk_job_name UNIQUE (name)
);
CREATE INDEX idx_service ON job_definition (service_name);
CREATE INDEX idx_enabled ON job_definition (enabled);

CREATE TABLE job_execution (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id       TEXT    NOT NULL,
    trace_id           TEXT    NOT NULL,
    job_name           TEXT    NOT NULL,
    trigger_type       TEXT    NOT NULL,
    fire_time          TEXT    NOT NULL,
    scheduler_instance TEXT,
    executor_instance  TEXT,
    shard_start        INTEGER NOT NULL,
    shard_end          INTEGER NOT NULL,
    shard_count        INTEGER NOT NULL,
    trigger_time       TEXT    NOT NULL,
    due_time           TEXT    NOT NULL,
    start_time         TEXT,
    finish_time        TEXT,
    duration_ms        INTEGER,
    status             TEXT    NOT NULL,
    retry_count        INTEGER NOT NULL DEFAULT 0,
    parent_trace_id    TEXT,
    result_message     TEXT,
    error_message      TEXT,
    CONSTRAINT uk_execution_id UNIQUE (execution_id),
    CONSTRAINT uk_trace_id UNIQUE (trace_id)
);
CREATE INDEX idx_job_time ON job_execution (job_name, trigger_time);
CREATE INDEX idx_status ON job_execution (status, trigger_time);
CREATE INDEX idx_status_due ON job_execution (status, due_time);

CREATE TABLE job_fire (
    job_name           TEXT NOT NULL,
    fire_time          TEXT NOT NULL,
    scheduler_instance TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    PRIMARY KEY (job_name, fire_time)
);
CREATE INDEX idx_fire_created ON job_fire (created_at);

CREATE TABLE job_revision (
    id       INTEGER PRIMARY KEY,
    revision INTEGER NOT NULL
);
INSERT INTO job_revision (id, revision) VALUES (1, 0);
