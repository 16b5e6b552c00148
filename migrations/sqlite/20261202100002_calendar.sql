-- The calendar (`[[calendars]]` name) whose excluded dates a job does not fire on; NULL:
-- every date.
ALTER TABLE job_definition ADD COLUMN calendar TEXT NULL;
