-- Namespaces, tokens managed through the API, and the audit trail (see the MySQL migration
-- of the same name). SQLite's TEXT columns take the longer job keys as they are.
ALTER TABLE job_definition ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
CREATE INDEX idx_job_namespace ON job_definition (namespace, name);

CREATE TABLE api_token (
    name          TEXT NOT NULL PRIMARY KEY,
    role          TEXT NOT NULL,
    namespaces    TEXT NULL,
    secret_sha256 TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    created_by    TEXT NULL,
    rotated_at    TEXT NULL,
    CONSTRAINT uk_token_secret UNIQUE (secret_sha256)
);

CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    namespace TEXT NULL,
    target    TEXT NOT NULL,
    detail    TEXT NULL
);
CREATE INDEX idx_audit_at ON audit_log (at);
CREATE INDEX idx_audit_actor ON audit_log (actor, at);
CREATE INDEX idx_audit_namespace ON audit_log (namespace, at);
