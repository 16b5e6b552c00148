-- Compensation finds PENDING rows whose lease ran out along (status, trigger_time), an index
-- the data model keeps anyway (a row is written at or before its due time, so a row due
-- before the sweep's bound was triggered before it too): one index less for every fire to
-- write twice, its PENDING entry on the insert and its final one on the result
-- (docs/design.md, "What one fire writes").
DROP INDEX idx_status_due ON job_execution;
