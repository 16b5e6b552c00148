-- Gaining jobs reads the latest claims of the misfire window (WHERE fire_time >= ?).
CREATE INDEX idx_fire_time ON job_fire (fire_time);
