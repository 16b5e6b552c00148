-- Every move into RUNNING now names its start; rows an earlier version moved without one
-- (a failover note, a call with no answer) start at their due time, so the sweep of RUNNING
-- rows finds them.
UPDATE job_execution SET start_time = due_time WHERE status = 'RUNNING' AND start_time IS NULL;
