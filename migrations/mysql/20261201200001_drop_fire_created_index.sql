-- Nothing reads fire claims by their creation time (the purge and gains go by fire_time):
-- one index less to write for every fire.
DROP INDEX idx_fire_created ON job_fire;
