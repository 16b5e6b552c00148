-- Namespaces, tokens managed through the API, and the audit trail (docs/design.md,
-- "Namespaces", "Tokens", "Audit trail").
--
-- A job's key is its name in the `default` namespace and `namespace/name` in any other: the
-- job-name columns hold the key, so every job that exists keeps its key, its owner and its
-- execution ids. Widening a VARCHAR within two length bytes changes no row.
ALTER TABLE job_definition
    MODIFY name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key: the name in `default`, namespace/name elsewhere',
    ADD COLUMN namespace VARCHAR(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'default',
    ADD KEY idx_job_namespace (namespace, name);
ALTER TABLE job_execution
    MODIFY job_name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key';
ALTER TABLE job_fire
    MODIFY job_name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key';
ALTER TABLE job_tombstone
    MODIFY name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key';
ALTER TABLE execution_stop
    MODIFY job_name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key';
ALTER TABLE job_history
    MODIFY name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key';
ALTER TABLE job_backfill
    MODIFY job_name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the job key';

-- Tokens created through the API. Only the SHA-256 of the secret is kept.
CREATE TABLE api_token (
    name          VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    role          VARCHAR(20)  NOT NULL COMMENT 'viewer | operator | admin',
    namespaces    TEXT         NULL COMMENT 'JSON array of the namespaces it may act in; NULL: all',
    secret_sha256 CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at    DATETIME(3)  NOT NULL,
    created_by    VARCHAR(100) NULL,
    rotated_at    DATETIME(3)  NULL,
    PRIMARY KEY (name),
    UNIQUE KEY uk_token_secret (secret_sha256)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'API tokens managed through /api/v1/tokens';

-- Who did what, when.
CREATE TABLE audit_log (
    id        BIGINT       NOT NULL AUTO_INCREMENT,
    at        DATETIME(3)  NOT NULL,
    actor     VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'token name, proxy user, nacos, or anonymous',
    action    VARCHAR(40)  NOT NULL,
    namespace VARCHAR(40)  CHARACTER SET ascii COLLATE ascii_bin NULL,
    target    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    detail    MEDIUMTEXT   NULL COMMENT 'JSON: the change',
    PRIMARY KEY (id),
    KEY idx_audit_at (at),
    KEY idx_audit_actor (actor, at),
    KEY idx_audit_namespace (namespace, at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'the audit trail';
