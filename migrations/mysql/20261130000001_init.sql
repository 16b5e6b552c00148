-- JobFlow schema for MySQL 8 and MariaDB 10.11. Times are UTC DATETIME(3).
-- Names are compared byte-wise (utf8mb4_bin): job names are case-sensitive, as their hash is.

CREATE TABLE job_definition (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name            VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    service_name    VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'executor service in Nacos',
    handler         VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    cron            VARCHAR(100) NOT NULL,
    timezone        VARCHAR(64)  NOT NULL DEFAULT 'UTC' COMMENT 'IANA name',
    enabled         BOOLEAN      NOT NULL DEFAULT TRUE,
    shard_count     INT          NOT NULL DEFAULT 1,
    shard_strategy  VARCHAR(20)  NOT NULL DEFAULT 'MOD_HASH' COMMENT 'MOD_HASH | RANGE | CUSTOM',
    shard_params    TEXT         NULL COMMENT 'JSON',
    job_params      TEXT         NULL COMMENT 'JSON passed to the executor',
    timeout_seconds INT          NOT NULL DEFAULT 300,
    max_retry       INT          NOT NULL DEFAULT 3,
    misfire_policy  VARCHAR(20)  NOT NULL DEFAULT 'FIRE_ONCE_NOW' COMMENT 'FIRE_ONCE_NOW | DO_NOTHING',
    description     VARCHAR(500) NULL,
    created_at      DATETIME(3)  NOT NULL,
    updated_at      DATETIME(3)  NOT NULL,
    created_by      VARCHAR(100) NULL,
    updated_by      VARCHAR(100) NULL,
    UNIQUE KEY uk_job_name (name),
    KEY idx_service (service_name),
    KEY idx_enabled (enabled)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'job definitions';

CREATE TABLE job_execution (
    id                 BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    execution_id       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'job:fireTime:shardStart-shardEnd',
    trace_id           VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    job_name           VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    trigger_type       VARCHAR(20)  NOT NULL COMMENT 'CRON | MANUAL | RETRY | COMPENSATION',
    fire_time          DATETIME(3)  NOT NULL COMMENT 'the scheduled instant',
    scheduler_instance VARCHAR(100) NULL,
    executor_instance  VARCHAR(100) NULL,
    shard_start        INT          NOT NULL,
    shard_end          INT          NOT NULL,
    shard_count        INT          NOT NULL,
    trigger_time       DATETIME(3)  NOT NULL,
    due_time           DATETIME(3)  NOT NULL COMMENT 'earliest dispatch (retry backoff)',
    start_time         DATETIME(3)  NULL,
    finish_time        DATETIME(3)  NULL,
    duration_ms        BIGINT       NULL,
    status             VARCHAR(20)  NOT NULL COMMENT 'PENDING | RUNNING | SUCCESS | FAILED | TIMEOUT',
    retry_count        INT          NOT NULL DEFAULT 0,
    parent_trace_id    VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    result_message     TEXT         NULL,
    error_message      TEXT         NULL,
    UNIQUE KEY uk_execution_id (execution_id),
    UNIQUE KEY uk_trace_id (trace_id),
    KEY idx_job_time (job_name, trigger_time),
    KEY idx_status (status, trigger_time),
    KEY idx_status_due (status, due_time)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'one row per shard range per fire';

-- The fire guard: at most one scheduler dispatches a (job, fire_time), whatever executor
-- list it sees.
CREATE TABLE job_fire (
    job_name           VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fire_time          DATETIME(3)  NOT NULL,
    scheduler_instance VARCHAR(100) NOT NULL,
    created_at         DATETIME(3)  NOT NULL,
    PRIMARY KEY (job_name, fire_time),
    KEY idx_fire_created (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Bumped in the same transaction as every job change; instances poll it to reload jobs
-- changed through other instances.
CREATE TABLE job_revision (
    id       INT    NOT NULL PRIMARY KEY,
    revision BIGINT NOT NULL
) ENGINE = InnoDB;

INSERT INTO job_revision (id, revision) VALUES (1, 0);
