-- The calendar (`[[calendars]]` name) whose excluded dates a job does not fire on; NULL:
-- every date.
ALTER TABLE job_definition
    ADD COLUMN calendar VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
        COMMENT 'a [[calendars]] name; NULL: every date';
