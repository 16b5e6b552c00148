module jobflow/executor

go 1.19
