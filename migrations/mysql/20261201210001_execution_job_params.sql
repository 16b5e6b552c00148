-- A run's own jobParams (a manual trigger's override), kept on its row so that whoever sends
-- the row to an executor (the triggering instance, compensation on another instance, a
-- retry) sends the run's params. NULL: the run uses the job's own jobParams.
ALTER TABLE job_execution
    ADD COLUMN job_params TEXT NULL COMMENT 'JSON: this run''s jobParams override; NULL = the job''s';
