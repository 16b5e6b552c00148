-- GET /api/v1/executions pages newest first over all jobs, optionally by executor: both read
-- an index range in trigger_time order instead of sorting the table. The job and status
-- filters already have (job_name, trigger_time) and (status, trigger_time); the trigger type
-- filter walks the trigger_time index (each index costs every insert, so only these two).
CREATE INDEX idx_trigger_time ON job_execution (trigger_time);
CREATE INDEX idx_executor_time ON job_execution (executor_instance, trigger_time);
