"""create -> trigger -> history through a client that openapi-python-client generated from the
served OpenAPI document (scripts/client-roundtrip.sh generates it and runs this file).

Arguments: base URL, admin token. Exits non-zero on any mismatch.
"""

import sys
import time

from jobflow_client import AuthenticatedClient, Client
from jobflow_client.api.executions import (
    get_execution,
    list_executions,
    search_executions,
    trigger_job,
)
from jobflow_client.api.jobs import create_job, delete_job, get_job
from jobflow_client.models import (
    ExecutionStatus,
    JobCreateRequest,
    JobView,
    PageExecution,
    Problem,
    ShardStrategy,
    TimeZone,
    TriggerRequest,
)

base_url, token = sys.argv[1], sys.argv[2]
client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)


def check(cond, what):
    if not cond:
        sys.exit(f"FAILED: {what}")


# Create: typed body, enums and the time zone as generated types.
body = JobCreateRequest(
    name="client-roundtrip",
    service_name="demo-executor",
    handler="succeed",
    cron="0 0 3 * * ?",
    timezone=TimeZone.ASIA_SHANGHAI,
    shard_count=2,
    shard_strategy=ShardStrategy.MOD_HASH,
    job_params={"batch": 5},
)
created = create_job.sync_detailed(client=client, body=body)
check(created.status_code == 201, f"create answered {created.status_code}: {created.content!r}")
job = created.parsed
check(isinstance(job, JobView), f"create parsed as {type(job)}")
check(job.name == "client-roundtrip" and job.shard_count == 2, f"created {job}")
check(job.timezone == "Asia/Shanghai", f"timezone {job.timezone}")

# A duplicate is a typed problem+json, not an exception.
dup = create_job.sync_detailed(client=client, body=body)
check(dup.status_code == 409 and isinstance(dup.parsed, Problem), f"duplicate: {dup.status_code}")

# Trigger: one execution per shard range (two shards over one executor: one range). The body
# is optional in the document; the generated client needs one passed (empty is fine).
triggered = trigger_job.sync(name="client-roundtrip", client=client, body=TriggerRequest())
check(isinstance(triggered, list) and len(triggered) == 1, f"trigger returned {triggered}")
trace_id = triggered[0].trace_id
check(triggered[0].job_name == "client-roundtrip", f"trigger: {triggered[0]}")

# Follow the execution until the demo executor's answer settles it.
deadline = time.monotonic() + 60
execution = get_execution.sync(trace_id=trace_id, client=client)
while execution.status in (ExecutionStatus.PENDING, ExecutionStatus.RUNNING):
    check(time.monotonic() < deadline, f"execution {trace_id} still {execution.status}")
    time.sleep(0.2)
    execution = get_execution.sync(trace_id=trace_id, client=client)
check(execution.status == ExecutionStatus.SUCCESS, f"execution ended {execution.status}")
check((execution.shard_start, execution.shard_end) == (0, 1), f"range {execution}")

# History: the job's page and the search find the same execution.
history = list_executions.sync(name="client-roundtrip", client=client, size=10)
check(isinstance(history, PageExecution), f"history parsed as {type(history)}")
check([e.trace_id for e in history.content] == [trace_id], f"history {history.content}")
check(history.total_elements == 1 and history.number == 0, f"page {history}")
found = search_executions.sync(
    client=client, job_name="client-roundtrip", status=ExecutionStatus.SUCCESS
)
check([e.trace_id for e in found.content] == [trace_id], f"search {found.content}")

# Delete: the job is gone, its history stays reachable through the search.
deleted = delete_job.sync_detailed(name="client-roundtrip", client=client)
check(deleted.status_code == 204, f"delete answered {deleted.status_code}")
gone = get_job.sync_detailed(name="client-roundtrip", client=client)
check(gone.status_code == 404 and isinstance(gone.parsed, Problem), f"get after delete {gone.status_code}")
found = search_executions.sync(client=client, job_name="client-roundtrip")
check([e.trace_id for e in found.content] == [trace_id], f"search after delete {found.content}")

# Without a token: the documented 401, as a typed problem.
anonymous = Client(base_url=base_url, raise_on_unexpected_status=True)
denied = list_executions.sync_detailed(name="x", client=anonymous)
check(denied.status_code == 401 and isinstance(denied.parsed, Problem), f"anonymous {denied.status_code}")

print(f"round trip ok: created, triggered {trace_id}, SUCCESS, in history and search")
