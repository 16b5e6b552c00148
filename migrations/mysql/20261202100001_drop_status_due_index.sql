-- The sweep of expired leases reads PENDING rows along (status, trigger_time): a row is never
-- due before it was triggered, so "due before X" lies within "triggered before X", and the
-- PENDING rows are the few open ones. One index less to insert for every row, and two
-- entries less to move on every status change.
DROP INDEX idx_status_due ON job_execution;
