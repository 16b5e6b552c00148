-- The cancel counter on a row of its own. It shared the job revision's row, so a job write
-- whose transaction stalled after taking its revision (its process paused, its link hung)
-- held back every cancel, and with them every COVER admission of every instance, until it
-- ended: the counters are bumped by different writers and read together, never written
-- together.
CREATE TABLE cancel_counter (
    id      INT    NOT NULL PRIMARY KEY,
    cancels BIGINT NOT NULL
) ENGINE = InnoDB;

INSERT INTO cancel_counter (id, cancels) SELECT id, cancels FROM job_revision WHERE id = 1;

ALTER TABLE job_revision DROP COLUMN cancels;
