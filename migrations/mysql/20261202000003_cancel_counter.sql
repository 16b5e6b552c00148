-- Counts the cancels of rows that may be called. A launcher reads it with the job revision
-- at each instant (the same row) and, when it moved, reads the status of the rows it is
-- about to call: a row claimed ahead by one instance and cancelled through another is not
-- called, even at an executor that cannot be asked to stop it.
ALTER TABLE job_revision ADD COLUMN cancels BIGINT NOT NULL DEFAULT 0;
