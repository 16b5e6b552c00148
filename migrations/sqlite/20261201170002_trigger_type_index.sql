-- GET /api/v1/executions?triggerType=: a rare type (MANUAL, CHILD) walked the trigger_time
-- index row by row (12 s for a page over 2 million rows with no match); with this index the
-- page and its count are an index range (under 1 ms).
CREATE INDEX idx_trigger_type_time ON job_execution (trigger_type, trigger_time);
