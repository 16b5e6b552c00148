-- Gaining jobs reads the latest claims of the misfire window (WHERE fire_time >= ?); the
-- table keeps a day of claims, so that range needs its own index.
CREATE INDEX idx_fire_time ON job_fire (fire_time);
