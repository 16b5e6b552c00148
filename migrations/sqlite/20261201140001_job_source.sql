-- Where a job is defined: API (the REST API) or NACOS (the jobs document in the Nacos config
-- centre, which the API then refuses to change or delete).
ALTER TABLE job_definition ADD COLUMN source TEXT NOT NULL DEFAULT 'API';

-- The jobs document last applied, per Nacos data id and group (content_hash is compared and
-- set in the transaction that applies it).
CREATE TABLE job_document (
    data_id      TEXT NOT NULL,
    group_name   TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    entry_hashes TEXT NOT NULL,
    applied_at   TEXT NOT NULL,
    checked_at   TEXT NOT NULL,
    PRIMARY KEY (data_id, group_name)
);
