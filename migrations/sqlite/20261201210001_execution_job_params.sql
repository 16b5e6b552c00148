-- A run's own jobParams (a manual trigger's override), kept on its row so that whoever sends
-- the row to an executor sends the run's params (see the MySQL migration of the same name).
-- NULL: the run uses the job's own jobParams.
ALTER TABLE job_execution ADD COLUMN job_params TEXT;
