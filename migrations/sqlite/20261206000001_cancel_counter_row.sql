-- The cancel counter on a row of its own; see the MySQL migration of the same name.
CREATE TABLE cancel_counter (
    id      INTEGER NOT NULL PRIMARY KEY,
    cancels INTEGER NOT NULL
);

INSERT INTO cancel_counter (id, cancels) SELECT id, cancels FROM job_revision WHERE id = 1;

ALTER TABLE job_revision DROP COLUMN cancels;
