-- The Nacos group a job's executor service is registered in (NULL: the scheduler's
-- `nacos.group`), for teams that register their services in groups of their own.
ALTER TABLE job_definition
    ADD COLUMN service_group VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
        COMMENT 'Nacos group of service_name; NULL: nacos.group' AFTER service_name;
