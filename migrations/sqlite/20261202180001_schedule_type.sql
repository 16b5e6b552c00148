-- Schedule types (docs/api.md, "Schedule types"): CRON jobs keep their cron; FIXED_RATE jobs fire
-- every interval_seconds from start_at; ONCE jobs at start_at; NONE jobs only when triggered.
-- cron is NULL for every type but CRON. SQLite cannot drop a NOT NULL constraint in place, so
-- the table is rebuilt with the same columns, rows, ids and id sequence.

CREATE TABLE job_definition_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    name            TEXT    NOT NULL,
    service_name    TEXT    NOT NULL,
    handler         TEXT    NOT NULL,
    cron            TEXT    NULL,
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
    enabled_since   TEXT    NULL,
    route_strategy  TEXT    NOT NULL DEFAULT 'ROUND_ROBIN',
    overlap_policy  TEXT    NOT NULL DEFAULT 'ALLOW',
    child_jobs      TEXT,
    alert_channels  TEXT,
    source          TEXT    NOT NULL DEFAULT 'API',
    revision        INTEGER NOT NULL DEFAULT 0,
    service_group   TEXT    NULL,
    calendar        TEXT    NULL,
    schedule_type   TEXT    NOT NULL DEFAULT 'CRON',
    interval_seconds INTEGER NULL,
    start_at        TEXT    NULL,
    CONSTRAINT uk_job_name UNIQUE (name)
);

INSERT INTO job_definition_new (
    id, name, service_name, handler, cron, timezone, enabled, shard_count, shard_strategy,
    shard_params, job_params, timeout_seconds, max_retry, misfire_policy, description,
    created_at, updated_at, created_by, updated_by, enabled_since, route_strategy,
    overlap_policy, child_jobs, alert_channels, source, revision, service_group, calendar)
SELECT
    id, name, service_name, handler, cron, timezone, enabled, shard_count, shard_strategy,
    shard_params, job_params, timeout_seconds, max_retry, misfire_policy, description,
    created_at, updated_at, created_by, updated_by, enabled_since, route_strategy,
    overlap_policy, child_jobs, alert_channels, source, revision, service_group, calendar
FROM job_definition;

-- Ids of deleted jobs are not handed out again.
DELETE FROM sqlite_sequence WHERE name = 'job_definition_new';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'job_definition_new', seq FROM sqlite_sequence WHERE name = 'job_definition';

DROP TABLE job_definition;
ALTER TABLE job_definition_new RENAME TO job_definition;
CREATE INDEX idx_service ON job_definition (service_name);
CREATE INDEX idx_enabled ON job_definition (enabled);
CREATE INDEX idx_job_revision ON job_definition (revision);
