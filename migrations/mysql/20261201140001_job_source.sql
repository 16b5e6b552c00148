-- Where a job is defined: API (the REST API) or NACOS (the jobs document in the Nacos config
-- centre, which the API then refuses to change or delete).
ALTER TABLE job_definition
    ADD COLUMN source VARCHAR(10) NOT NULL DEFAULT 'API' COMMENT 'API | NACOS';

-- The jobs document last applied, per Nacos data id and group. Applying compares and sets
-- content_hash in one transaction with the job changes, so of several instances seeing the
-- same push exactly one applies it and the others find nothing to do.
CREATE TABLE job_document (
    data_id      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    group_name   VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    content_hash VARCHAR(64)  NOT NULL COMMENT 'hex SHA-256 of the applied content',
    entry_hashes MEDIUMTEXT   NOT NULL COMMENT 'JSON: job name -> hex SHA-256 of its entry',
    applied_at   DATETIME(3)  NOT NULL,
    checked_at   DATETIME(3)  NOT NULL,
    PRIMARY KEY (data_id, group_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
