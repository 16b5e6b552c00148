"""The operations console, driven in headless chromium like an operator would use it."""

import re
import time

from playwright.sync_api import expect

from conftest import ADMIN, OPERATOR, VIEWER, screenshot

NAV = ["Overview", "Jobs", "Executions", "Executors", "Cluster"]
WRITE_BUTTONS = ["Trigger", "Enable", "Disable", "Edit", "Delete", "Retry", "Cancel"]


def sign_in(page, server, token=ADMIN):
    page.goto(server.base + "/")
    expect(page).to_have_url(server.base + "/ui/")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("link", name="Overview", exact=True)).to_be_visible()


def wait_settled(server, job):
    """The job's newest execution once it is final."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, page = server.call("GET", f"/api/v1/jobs/{job}/executions?size=1")
        assert status == 200, page
        if page["content"] and page["content"][0]["status"] not in ("PENDING", "RUNNING"):
            return page["content"][0]
        time.sleep(0.1)
    raise AssertionError(f"{job}: no final execution")


def nav(page, name):
    """A link of the main navigation (pages have breadcrumbs with the same names)."""
    return page.get_by_role("navigation", name="Main").get_by_role("link", name=name, exact=True)


def row(page, name):
    return page.locator("tr", has=page.get_by_role("link", name=name, exact=True))


def test_sign_in_keeps_the_token_for_the_session_and_sign_out_clears_it(page, server):
    page.goto(server.base + "/")
    expect(page).to_have_url(server.base + "/ui/")
    expect(page.get_by_label("Token")).to_be_visible()
    expect(page.get_by_role("link", name="Jobs", exact=True)).to_have_count(0)

    page.get_by_label("Token").fill("not-a-token")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_have_text("That token was not accepted.")
    assert page.evaluate("sessionStorage.getItem('jobflow.token')") is None

    page.get_by_label("Token").fill(ADMIN)
    page.get_by_role("button", name="Sign in", exact=True).click()
    for name in NAV:
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.locator("#who")).to_have_text("ada (admin)")
    assert page.evaluate("sessionStorage.getItem('jobflow.token')") == ADMIN
    assert page.evaluate("localStorage.getItem('jobflow.token')") is None

    page.reload()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Token")).to_be_visible()
    expect(page.get_by_role("link", name="Jobs", exact=True)).to_have_count(0)
    assert page.evaluate("sessionStorage.getItem('jobflow.token')") is None


def test_language_switch_and_a_chinese_browser(page, server, browser):
    sign_in(page, server)
    page.get_by_role("button", name="Switch to Chinese").click()
    for name in ["概览", "任务", "执行记录", "集群"]:
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="退出登录")).to_be_visible()
    page.get_by_role("button", name="切换到英文").click()
    for name in NAV:
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()

    context = browser.new_context(locale="zh-CN")
    try:
        zh = context.new_page()
        zh.goto(server.base + "/ui/")
        expect(zh.get_by_label("令牌")).to_be_visible()
        assert zh.evaluate("document.documentElement.lang") == "zh-CN"
    finally:
        context.close()


def test_create_trigger_and_see_the_execution_succeed(page, server):
    sign_in(page, server)
    nav(page, "Jobs").click()
    page.get_by_role("link", name="New job").click()
    expect(page.get_by_role("heading", name="New job")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("made-in-the-console")
    page.get_by_label("Executor service").fill("demo")
    page.get_by_label("Handler").fill("succeed")
    page.get_by_label("Overlap policy").select_option("SKIP")
    page.get_by_label("Cron").fill("0 30 4 * * ?")
    # The live preview: the next fire times from the API as you type.
    expect(page.locator(".preview")).to_contain_text("every day at 04:30")
    expect(page.locator(".preview li")).to_have_count(5)
    expect(page.locator(".preview li").first).to_contain_text("04:30:00")
    page.get_by_role("button", name="Save").click()

    expect(page.get_by_role("heading", name="made-in-the-console")).to_be_visible()
    status, job = server.call("GET", "/api/v1/jobs/made-in-the-console")
    assert status == 200 and job["cron"] == "0 30 4 * * ?" and job["createdBy"] == "ada", job
    assert job["overlapPolicy"] == "SKIP" and job["routeStrategy"] == "ROUND_ROBIN", job

    page.get_by_role("button", name="Trigger").click()
    expect(page.get_by_role("status")).to_contain_text("Triggered: 1 execution(s) created.")
    expect(page.locator("table.executions .badge")).to_have_text(["SUCCESS"], timeout=20_000)
    done = wait_settled(server, "made-in-the-console")
    assert done["status"] == "SUCCESS" and done["triggerType"] == "MANUAL", done
    assert done["executorInstance"] == server.executor, done


def test_a_job_named_in_chinese_with_its_own_group_and_calendar_round_trips_through_the_form(page, server):
    name, path = "订单对账", "/api/v1/jobs/%E8%AE%A2%E5%8D%95%E5%AF%B9%E8%B4%A6"
    sign_in(page, server)
    nav(page, "Jobs").click()
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Executor service").fill("demo")
    page.get_by_label("Nacos group").fill("payments")
    page.get_by_label("Handler").fill("succeed")
    page.get_by_label("Cron").fill("0 30 4 * * ?")
    # A calendar that is not configured is named beside its field by the preview.
    page.get_by_label("Calendar").fill("no-such-calendar")
    expect(page.locator("#err-calendar")).to_contain_text("unknown calendar")
    page.get_by_label("Calendar").fill("cn-holidays")
    expect(page.locator(".preview li")).to_have_count(5)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    status, job = server.call("GET", path)
    assert status == 200 and job["name"] == name and job["serviceGroup"] == "payments", job
    assert job["calendar"] == "cn-holidays", job

    # An edit that does not touch the group keeps it (the form sends the whole job).
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Nacos group")).to_have_value("payments")
    page.get_by_label("Cron").fill("0 45 4 * * ?")
    page.get_by_role("button", name="Save").click()
    # The edit form's heading names the job too: wait for the job's page with the new cron.
    expect(page.locator("dl.definition")).to_contain_text("0 45 4 * * ?")
    status, job = server.call("GET", path)
    assert job["cron"] == "0 45 4 * * ?" and job["serviceGroup"] == "payments", job
    assert job["calendar"] == "cn-holidays", job

    # Listed, and reached from the list by its link.
    nav(page, "Jobs").click()
    row(page, name).get_by_role("link", name=name, exact=True).click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(page.locator("dl.definition")).to_contain_text("payments")


def test_a_fixed_rate_job_made_in_the_form_then_turned_into_a_fixed_delay_and_one_run_only_when_triggered(page, server):
    sign_in(page, server)
    nav(page, "Jobs").click()
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Name", exact=True).fill("every-90s")
    page.get_by_label("Executor service").fill("demo")
    page.get_by_label("Handler").fill("succeed")
    page.get_by_label("Time zone").fill("UTC")
    # Each schedule type shows its own fields only.
    expect(page.get_by_label("Interval (seconds)")).to_be_hidden()
    page.get_by_label("Schedule type").select_option("FIXED_RATE")
    expect(page.get_by_label("Cron")).to_be_hidden()
    page.get_by_label("Interval (seconds)").fill("90")
    page.get_by_label("Start at").fill("2099-01-01T00:00:00Z")
    expect(page.locator(".preview li")).to_have_count(5)
    expect(page.locator(".preview li").nth(1)).to_contain_text("00:01:30")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="every-90s")).to_be_visible()
    expect(page.locator("dl.definition")).to_contain_text("every 90 s")
    status, job = server.call("GET", "/api/v1/jobs/every-90s")
    assert status == 200, job
    assert (job["scheduleType"], job["intervalSeconds"], job["cron"]) == ("FIXED_RATE", 90, None), job
    assert job["startAt"] == "2099-01-01T00:00:00Z", job

    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Interval (seconds)")).to_have_value("90")
    # A fixed delay: one instant ahead, the rest follow the ends of fires.
    page.get_by_label("Schedule type").select_option("FIXED_DELAY")
    expect(page.locator(".preview li")).to_have_count(1)
    expect(page.locator(".preview")).to_contain_text("then 90 s after each fire ends")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("dl.definition")).to_contain_text("90 s after each fire ends")
    status, job = server.call("GET", "/api/v1/jobs/every-90s")
    assert (job["scheduleType"], job["intervalSeconds"]) == ("FIXED_DELAY", 90), job

    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Schedule type").select_option("NONE")
    expect(page.locator(".preview")).to_contain_text("only when triggered")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="every-90s")).to_be_visible()
    expect(page.locator("dl.definition")).to_contain_text("only when triggered")
    status, job = server.call("GET", "/api/v1/jobs/every-90s")
    assert (job["scheduleType"], job["intervalSeconds"], job["startAt"]) == ("NONE", None, None), job


def test_edit_with_a_bad_cron_shows_the_api_message_beside_the_field(page, server):
    server.create_job("bad-cron-edit")
    sign_in(page, server)
    page.goto(server.base + "/ui/#/jobs/bad-cron-edit")
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_role("heading", name="Edit bad-cron-edit")).to_be_visible()
    cron = page.get_by_label("Cron")
    cron.fill("0 61 * * * ?")
    page.get_by_role("button", name="Save").click()

    # The same message the API gives for this body.
    status, problem = server.call("PUT", "/api/v1/jobs/bad-cron-edit", {
        "serviceName": "demo", "handler": "succeed", "cron": "0 61 * * * ?"})
    assert status == 400, problem
    message = next(e["message"] for e in problem["errors"] if e["field"] == "cron")
    expect(page.locator("#err-cron")).to_have_text(message)
    expect(cron).to_have_attribute("aria-invalid", "true")
    status, job = server.call("GET", "/api/v1/jobs/bad-cron-edit")
    assert job["cron"] == "0 0 3 * * ?", job

    cron.fill("0 15 3 * * ?")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="bad-cron-edit", exact=True)).to_be_visible()
    status, job = server.call("GET", "/api/v1/jobs/bad-cron-edit")
    assert job["cron"] == "0 15 3 * * ?" and job["updatedBy"] == "ada", job


def test_disable_and_enable(page, server):
    server.create_job("toggle-me")
    sign_in(page, server)
    page.goto(server.base + "/ui/#/jobs/toggle-me")
    page.get_by_role("button", name="Disable").click()
    expect(page.get_by_role("button", name="Enable")).to_be_visible()
    expect(page.get_by_role("button", name="Disable")).to_have_count(0)
    assert server.call("GET", "/api/v1/jobs/toggle-me")[1]["enabled"] is False
    nav(page, "Jobs").click()
    expect(row(page, "toggle-me")).to_contain_text("disabled")

    page.goto(server.base + "/ui/#/jobs/toggle-me")
    page.get_by_role("button", name="Enable").click()
    expect(page.get_by_role("button", name="Disable")).to_be_visible()
    assert server.call("GET", "/api/v1/jobs/toggle-me")[1]["enabled"] is True


def test_a_failed_execution_stands_out_and_can_be_retried(page, server):
    server.create_job("always-fails", handler="fail", maxRetry=0)
    sign_in(page, server)
    page.goto(server.base + "/ui/#/jobs/always-fails")
    page.get_by_role("button", name="Trigger").click()
    failed = page.locator("table.executions tbody tr.row-bad")
    expect(failed.locator(".badge")).to_have_text("FAILED", timeout=20_000)
    failed.locator("a.mono").click()
    expect(page.locator("pre.error-message")).to_contain_text("failed on purpose")
    first_url = page.url
    page.get_by_role("button", name="Retry").click()
    expect(page).not_to_have_url(first_url)
    expect(page.locator(".chain li")).to_have_count(2)
    retry = wait_settled(server, "always-fails")
    assert retry["triggerType"] == "RETRY" and retry["retryCount"] == 1, retry
    assert page.url.endswith(retry["traceId"])


def test_a_run_shows_the_params_it_was_triggered_with(page, server):
    server.create_job("with-params", jobParams={"day": "monday"})
    status, own = server.call("POST", "/api/v1/jobs/with-params/trigger", {"jobParams": {"day": "friday"}})
    assert status == 200 and own[0]["jobParams"] == {"day": "friday"}, own
    plain = server.trigger("with-params")
    assert plain[0]["jobParams"] is None, plain
    sign_in(page, server)
    page.goto(server.base + f"/ui/#/executions/{own[0]['traceId']}")
    expect(page.locator("pre.params")).to_contain_text('"day": "friday"')
    page.goto(server.base + f"/ui/#/executions/{plain[0]['traceId']}")
    expect(page.get_by_text("the job's own", exact=True)).to_be_visible()
    expect(page.locator("pre.params")).to_have_count(0)


def test_delete_asks_first(page, server):
    server.create_job("delete-me")
    sign_in(page, server)
    page.goto(server.base + "/ui/#/jobs/delete-me")
    page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete job delete-me?")
    dialog.get_by_role("button", name="Keep").click()
    expect(dialog).to_have_count(0)
    assert server.call("GET", "/api/v1/jobs/delete-me")[0] == 200

    page.get_by_role("button", name="Delete").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    assert server.call("GET", "/api/v1/jobs/delete-me")[0] == 404


def test_a_viewer_sees_no_write_buttons_and_an_operator_no_admin_ones(page, server):
    server.create_job("read-only")
    server.trigger("read-only")
    done = wait_settled(server, "read-only")

    sign_in(page, server, VIEWER)
    expect(page.locator("#who")).to_have_text("vera (viewer)")
    nav(page, "Jobs").click()
    expect(row(page, "read-only")).to_be_visible()
    expect(page.get_by_role("link", name="New job")).to_have_count(0)
    page.goto(server.base + "/ui/#/jobs/read-only")
    expect(page.locator("table.executions .badge")).to_have_text(["SUCCESS"])
    for name in WRITE_BUTTONS:
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)
    page.goto(server.base + f"/ui/#/executions/{done['traceId']}")
    expect(page.get_by_role("heading", name="Retry chain")).to_be_visible()
    for name in WRITE_BUTTONS:
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, server, OPERATOR)
    page.goto(server.base + "/ui/#/jobs/read-only")
    expect(page.get_by_role("button", name="Trigger")).to_be_visible()
    expect(page.get_by_role("button", name="Disable")).to_be_visible()
    expect(page.get_by_role("link", name="Edit", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Delete", exact=True)).to_have_count(0)


def test_execution_search_across_jobs(page, server):
    server.create_job("search-ok")
    server.create_job("search-bad", handler="fail", maxRetry=0)
    server.trigger("search-ok")
    server.trigger("search-bad")
    ok = wait_settled(server, "search-ok")
    bad = wait_settled(server, "search-bad")
    assert (ok["status"], bad["status"]) == ("SUCCESS", "FAILED")
    sign_in(page, server)

    nav(page, "Executions").click()
    expect(page.get_by_role("heading", name="Executions")).to_be_visible()
    results = page.locator("table.executions tbody tr")
    expect(results.filter(has_text="search-ok")).to_contain_text("SUCCESS")
    # Failed executions stand out.
    expect(results.filter(has_text="search-bad")).to_have_class("row-bad")
    screenshot(page, "executions")

    page.get_by_label("Status").select_option("FAILED")
    page.get_by_label("Job").fill("search-ok")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("No executions match.")).to_be_visible()

    page.get_by_label("Status").select_option("SUCCESS")
    page.get_by_label("Trigger").select_option("MANUAL")
    page.get_by_role("button", name="Search").click()
    expect(results).to_have_count(1)
    expect(results.locator("a.mono")).to_have_text(ok["traceId"][:12])

    page.get_by_label("Status").select_option("")
    page.get_by_label("Job").fill("search-bad")
    page.get_by_label("From").fill("2099-01-01T00:00")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("No executions match.")).to_be_visible()
    page.get_by_label("From").fill("2000-01-01T00:00")
    page.get_by_role("button", name="Search").click()
    expect(results).to_have_count(1)
    expect(results).to_have_class("row-bad")
    expect(results.locator(".badge")).to_have_text("FAILED")


def test_cancel_a_running_execution(page, server):
    server.create_job("long-runner", handler="slow", jobParams={"seconds": 300}, timeoutSeconds=600)
    sign_in(page, server, OPERATOR)
    page.goto(server.base + "/ui/#/jobs/long-runner")
    page.get_by_role("button", name="Trigger").click()
    running = page.locator("table.executions tbody tr", has_text="RUNNING")
    expect(running).to_have_count(1, timeout=20_000)
    trace = running.locator("a.mono").get_attribute("href").rsplit("/", 1)[1]
    running.locator("a.mono").click()
    expect(page.locator("main h1 .badge")).to_have_text("RUNNING")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("main h1 .badge")).to_have_text("CANCELLED")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    assert server.execution(trace)["status"] == "CANCELLED"


def test_a_backfill_started_on_the_job_page_shows_its_progress(page, server):
    # Every minute, paused (a paused job can be backfilled); the form takes local times.
    server.create_job("backfilled", cron="0 * * * * ?", timezone="UTC", enabled=False)
    sign_in(page, server)
    page.goto(server.base + "/ui/#/jobs/backfilled")
    expect(page.get_by_text("No backfill of this job yet.")).to_be_visible()
    now = time.time()
    start = time.localtime(now - now % 60 - 600)
    end = time.localtime(now - now % 60 - 300)
    page.get_by_label("From").fill(time.strftime("%Y-%m-%dT%H:%M:%S", start))
    page.get_by_label("To (not included)").fill(time.strftime("%Y-%m-%dT%H:%M:%S", end))
    page.get_by_label("Instants per second").fill("2")
    page.get_by_role("button", name="Run past instants again").click()
    expect(page.get_by_text("Backfill started: 5 instant(s).")).to_be_visible()
    done = page.locator("table.backfills tbody tr").first
    # Followed live until it ends.
    expect(done.locator(".badge")).to_have_text("DONE", timeout=15_000)
    expect(done).to_contain_text("5 / 5")
    expect(done.get_by_role("button", name="Cancel")).to_have_count(0)
    _, runs = server.call("GET", "/api/v1/jobs/backfilled/executions?size=20")
    assert [r["triggerType"] for r in runs["content"]] == ["BACKFILL"] * 5, runs


def test_the_executors_page_shows_each_instance_with_its_last_call(page, server):
    server.create_job("executor-tour")
    server.trigger("executor-tour")
    done = wait_settled(server, "executor-tour")
    sign_in(page, server)
    nav(page, "Executors").click()
    expect(page.get_by_role("heading", name="Executors")).to_be_visible()
    card = page.locator("section.card", has=page.get_by_role("heading", name="demo", exact=True))
    instance = card.locator("tr", has_text=server.executor)
    expect(instance).to_be_visible()
    # The last call this instance made to it, whichever job it was for: a link to it.
    last = instance.locator("td").nth(3)
    expect(last.locator(".badge")).to_have_text(re.compile("SUCCESS|FAILED|TIMEOUT|CANCELLED"))
    expect(instance.locator("td").nth(2)).to_have_text(re.compile(r"^\d+$"))
    _, view = server.call("GET", "/api/v1/executors")
    demo = next(s for s in view["services"] if s["serviceName"] == "demo" and not s["serviceGroup"])
    assert demo["instances"][0]["address"] == server.executor, demo
    assert demo["instances"][0]["lastCall"] is not None, demo
    assert done["status"] == "SUCCESS", done


def test_an_execution_page_follows_the_handlers_log_while_it_runs(page, server):
    server.create_job("log-tour", handler="slow", jobParams={"seconds": 4})
    [run] = server.trigger("log-tour")
    sign_in(page, server)
    page.goto(f"{server.base}/ui/#/executions/{run['traceId']}")
    log = page.get_by_role("log")
    # Lines appear while the execution still runs, before its result.
    expect(log).to_contain_text("working in the background")
    expect(log).to_contain_text("worked 1 of 4 s")
    assert server.execution(run["traceId"])["status"] == "RUNNING"
    expect(page.get_by_text("Following the log while the execution runs")).to_be_visible()
    # The same trace in the services' own log system (log.execution_link).
    expect(page.get_by_role("link", name="All of this execution's logs in the log system")).to_have_attribute(
        "href", f"https://logs.example/explore?trace={run['traceId']}")
    # Then the whole log, in order, and the page says so.
    expect(page.get_by_text("The whole log, lines: 5.")).to_be_visible(timeout=20_000)
    lines = log.locator(".log-line").all_inner_texts()
    assert [line.split(" INFO ", 1)[1] for line in lines] == [
        "working in the background seconds=4", "worked 1 of 4 s", "worked 2 of 4 s",
        "worked 3 of 4 s", "worked 4 of 4 s"], lines
    _, api = server.call("GET", f"/api/v1/jobs/executions/{run['traceId']}/logs")
    assert api["complete"] is True and len(api["lines"]) == 5, api


def namespace_picker(page):
    """The namespace selector in the header."""
    return page.locator("#ns").get_by_label("Namespace", exact=True)


def test_a_job_made_in_another_namespace_through_the_selector_is_listed_there_only(page, server):
    server.create_job("ns-tour-default")
    calls = []
    page.on("request", lambda r: calls.append(r.url) if "/api/v1/" in r.url else None)
    sign_in(page, server)
    nav(page, "Jobs").click()
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace default")
    expect(row(page, "ns-tour-default")).to_be_visible()
    picker = namespace_picker(page)
    expect(picker).to_have_value("default")

    # A name the API would refuse is not taken.
    picker.fill("Team A")
    picker.press("Enter")
    expect(picker).to_have_attribute("aria-invalid", "true")
    assert page.evaluate("sessionStorage.getItem('jobflow.namespace')") in (None, "default")

    picker.fill("team-a")
    picker.press("Enter")
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace team-a")
    expect(row(page, "ns-tour-default")).to_have_count(0)
    assert page.evaluate("sessionStorage.getItem('jobflow.namespace')") == "team-a"

    page.get_by_role("link", name="New job").click()
    expect(page.get_by_role("heading", name="New job")).to_contain_text("namespace team-a")
    page.get_by_label("Name", exact=True).fill("made-in-team-a")
    page.get_by_label("Executor service").fill("demo")
    page.get_by_label("Handler").fill("succeed")
    page.get_by_label("Cron").fill("0 30 4 * * ?")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="made-in-team-a")).to_be_visible()
    expect(page.locator(".crumbs")).to_contain_text("namespace team-a")
    expect(page.locator("dl.definition")).to_contain_text("team-a")
    status, job = server.call("GET", "/api/v1/jobs/made-in-team-a?namespace=team-a")
    assert status == 200 and job["namespace"] == "team-a" and job["createdBy"] == "ada", job
    assert server.call("GET", "/api/v1/jobs/made-in-team-a")[0] == 404

    # Its executions, history, page and log are found in its namespace.
    page.get_by_role("button", name="Trigger").click()
    expect(page.locator("table.executions .badge")).to_have_text(["SUCCESS"], timeout=20_000)
    page.locator("table.executions tbody tr a.mono").first.click()
    expect(page.locator("dl.definition")).to_contain_text("team-a")
    expect(page.get_by_role("log")).to_contain_text("succeeding")
    nav(page, "Executions").click()
    expect(page.locator("table.executions tbody tr")).to_have_count(1)
    expect(page.locator("table.executions tbody tr")).to_contain_text("made-in-team-a")

    # Kept for the browser session.
    nav(page, "Jobs").click()
    page.reload()
    expect(row(page, "made-in-team-a")).to_be_visible()
    expect(row(page, "ns-tour-default")).to_have_count(0)

    # Not listed in `default`.
    picker = namespace_picker(page)
    picker.fill("default")
    picker.press("Enter")
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace default")
    expect(row(page, "ns-tour-default")).to_be_visible()
    expect(row(page, "made-in-team-a")).to_have_count(0)
    expect(page.locator("#ns-seen option[value='team-a']")).to_have_count(1)

    # Every job and execution call named the namespace; the overview, of every namespace, did not.
    scoped = [u for u in calls if re.search(r"/api/v1/(jobs|executions)\b", u)]
    assert scoped and all("namespace=" in u for u in scoped), scoped
    others = [u for u in calls if "/api/v1/overview" in u or "/api/v1/auth/me" in u]
    assert others and not any("namespace=" in u for u in others), others


def test_a_token_made_on_the_tokens_page_restricted_to_namespaces_sees_only_those(page, server):
    server.create_job("only-in-default")
    server.create_job("only-in-team-a", namespace="team-a")
    sign_in(page, server)
    nav(page, "Tokens").click()
    expect(page.get_by_role("heading", name="Tokens", exact=True)).to_be_visible()
    page.get_by_label("Name", exact=True).fill("team-a-operator")
    page.get_by_label("Role").select_option("operator")
    page.get_by_label("Namespaces").fill("team-a, team-b")
    page.get_by_role("button", name="Create token").click()

    box = page.locator("section.secret")
    expect(box).to_contain_text("Secret of the new token team-a-operator")
    expect(box).to_contain_text("shown only this once")
    secret = page.locator("#token-secret").inner_text()
    assert secret.startswith("jf_"), secret
    listed = page.locator("table.tokens tbody tr", has_text="team-a-operator")
    expect(listed).to_contain_text("team-a, team-b")
    expect(listed).to_contain_text("operator")
    _, tokens = server.call("GET", "/api/v1/tokens")
    made = next(t for t in tokens if t["name"] == "team-a-operator")
    assert made["namespaces"] == ["team-a", "team-b"] and made["createdBy"] == "ada", made
    assert "token" not in made, made

    # Shown once: coming back to the page shows the token, never its secret.
    nav(page, "Jobs").click()
    nav(page, "Tokens").click()
    expect(listed).to_be_visible()
    expect(page.locator("section.secret")).to_have_count(0)
    assert secret not in page.content()

    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Token").fill(secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.locator("#who")).to_have_text("team-a-operator (operator)")
    # It lands on the jobs of its first namespace.
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace team-a")
    expect(row(page, "only-in-team-a")).to_be_visible()
    expect(row(page, "only-in-default")).to_have_count(0)
    for name in ["Jobs", "Executions"]:
        expect(nav(page, name)).to_be_visible()
    for name in ["Overview", "Executors", "Cluster", "Tokens", "Audit"]:
        expect(nav(page, name)).to_have_count(0)
    picker = namespace_picker(page)
    expect(picker.locator("option")).to_have_text(["team-a", "team-b"])
    expect(picker).to_have_value("team-a")

    picker.select_option("team-b")
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace team-b")
    expect(page.get_by_text("No jobs match.")).to_be_visible()
    # An address naming a namespace the token may not act in keeps the one it has.
    page.goto(server.base + "/ui/#/jobs?ns=default")
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace team-b")
    page.goto(server.base + "/ui/#/jobs/only-in-team-a?ns=team-a")
    expect(page.get_by_role("heading", name="only-in-team-a")).to_be_visible()
    expect(page.get_by_role("button", name="Trigger")).to_be_visible()
    page.locator(".brand").click()
    expect(page.get_by_role("heading", name="Jobs")).to_contain_text("namespace team-a")
    assert server.call("GET", "/api/v1/overview", token=secret)[0] == 403
    assert server.call("GET", "/api/v1/jobs", token=secret)[0] == 403


def test_rotate_shows_a_new_secret_once_and_revoke_asks_first(page, server):
    status, made = server.call("POST", "/api/v1/tokens", {"name": "rotate-me", "role": "viewer", "namespaces": None})
    assert status == 201, made
    sign_in(page, server)
    page.goto(server.base + "/ui/#/tokens")
    listed = page.locator("table.tokens tbody tr", has_text="rotate-me")
    expect(listed).to_contain_text("all")

    listed.get_by_role("button", name="Rotate").click()
    page.get_by_role("dialog").get_by_role("button", name="Rotate").click()
    expect(page.locator("section.secret")).to_contain_text("New secret of token rotate-me")
    rotated = page.locator("#token-secret").inner_text()
    assert rotated.startswith("jf_") and rotated != made["token"]
    assert server.call("GET", "/api/v1/auth/me", token=made["token"])[0] == 401
    assert server.call("GET", "/api/v1/auth/me", token=rotated)[0] == 200

    listed.get_by_role("button", name="Revoke").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Revoke token rotate-me?")
    dialog.get_by_role("button", name="Keep").click()
    expect(listed).to_be_visible()
    assert server.call("GET", "/api/v1/auth/me", token=rotated)[0] == 200

    listed.get_by_role("button", name="Revoke").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    expect(page.get_by_role("status")).to_contain_text("Token rotate-me revoked.")
    expect(listed).to_have_count(0)
    assert server.call("GET", "/api/v1/auth/me", token=rotated)[0] == 401


def test_the_audit_trail_lists_changes_and_filters_by_action(page, server):
    server.create_job("audited-job")
    status, made = server.call("POST", "/api/v1/tokens", {"name": "audited-token", "role": "viewer", "namespaces": ["team-c"]})
    assert status == 201, made
    sign_in(page, server)
    nav(page, "Audit").click()
    expect(page.get_by_role("heading", name="Audit trail")).to_be_visible()
    entries = page.locator("table.audit tbody tr")
    created = entries.filter(has=page.get_by_role("link", name="audited-job", exact=True))
    expect(created).to_have_count(1)
    expect(created).to_contain_text("JOB_CREATED")
    expect(created).to_contain_text("ada")
    expect(created).to_contain_text("default")
    token = entries.filter(has_text="audited-token")
    expect(token).to_contain_text("TOKEN_CREATED")
    # The detail as compact JSON.
    expect(token.locator("code.detail")).to_contain_text('"namespaces":["team-c"]')
    expect(token.locator("code.detail")).to_contain_text('"role":"viewer"')
    # Newest first.
    expect(entries.first).to_contain_text("audited-token")

    page.get_by_label("Action").select_option("TOKEN_CREATED")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"#/audit\?action=TOKEN_CREATED"))
    expect(created).to_have_count(0)
    expect(token).to_be_visible()
    actions = entries.locator("td:nth-child(3)").all_inner_texts()
    assert actions and set(actions) == {"TOKEN_CREATED"}, actions

    page.get_by_label("Action").select_option("")
    page.get_by_label("Target").fill("audited-job")
    page.get_by_role("button", name="Search").click()
    expect(entries).to_have_count(1)
    # The target leads to the job, in its namespace.
    created.get_by_role("link", name="audited-job").click()
    expect(page.get_by_role("heading", name="audited-job")).to_be_visible()

    _, trail = server.call("GET", "/api/v1/audit?action=TOKEN_CREATED&target=audited-token")
    assert trail["totalElements"] == 1 and trail["content"][0]["actor"] == "ada", trail


def test_every_page(page, server):
    server.create_job("page-tour", description="Shown on every page")
    server.trigger("page-tour")
    done = wait_settled(server, "page-tour")
    assert done["status"] == "SUCCESS", done
    # Last in this file, so the other tests' jobs and executions fill the pages.
    transfers = []
    page.on("requestfinished", lambda r: transfers.append(r))
    sign_in(page, server)

    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator(".stat", has_text="Fires, last hour")).to_be_visible()
    expect(page.locator(".stat", has_text="Failures, last hour")).to_be_visible()
    expect(page.locator(".stat", has_text="Fire delay")).to_be_visible()
    expect(page.get_by_text("compensation leader").first).to_be_visible()
    demo = page.locator("tr", has=page.get_by_role("link", name="demo", exact=True))
    # Jobs of other tests name the group `payments` for the same service (shown apart).
    expect(demo.filter(has_not_text="payments")).to_contain_text(server.executor)
    screenshot(page, "overview")
    check_page_weight(transfers)

    api_calls = []

    def note_api_call(request):
        if "/api/v1/" in request.url:
            api_calls.append(request.url)

    page.on("request", note_api_call)
    nav(page, "Jobs").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    tour = row(page, "page-tour")
    expect(tour).to_contain_text("every day at 03:00")
    expect(tour.locator(".badge")).to_have_text("SUCCESS")
    page.remove_listener("request", note_api_call)
    # One call for the whole page, whatever the number of jobs on it (every test's jobs).
    rows = page.locator("table tbody tr").count()
    assert rows >= 2, rows
    assert len(api_calls) == 1 and "/api/v1/jobs?" in api_calls[0], api_calls
    assert "summary=true" in api_calls[0], api_calls
    page.get_by_label("Name starts with").fill("zzz")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("No jobs match.")).to_be_visible()
    page.get_by_label("Name starts with").fill("page-")
    page.get_by_role("button", name="Search").click()
    expect(row(page, "page-tour")).to_be_visible()
    screenshot(page, "jobs")

    row(page, "page-tour").get_by_role("link", name="page-tour").click()
    expect(page.get_by_role("heading", name="page-tour")).to_be_visible()
    expect(page.get_by_text("Shown on every page")).to_be_visible()
    expect(page.locator(".fire-times li")).to_have_count(10)
    expect(page.locator("#history-title")).to_have_text("History")
    expect(page.locator("table.executions .badge")).to_have_text(["SUCCESS"])
    screenshot(page, "job")

    page.locator("table.executions tbody tr a.mono").first.click()
    expect(page.get_by_role("heading", name=re.compile(done["traceId"]))).to_be_visible()
    details = page.locator("dl.definition")
    expect(details).to_contain_text(server.executor)
    expect(details).to_contain_text(done["executionId"])
    expect(details).to_contain_text("0–0 of 1")
    expect(page.get_by_role("heading", name="Retry chain")).to_be_visible()
    # The demo's handler logs one line: the page shows the whole log.
    expect(page.get_by_role("log")).to_contain_text("succeeding")
    expect(page.get_by_text("The whole log, lines: 1.")).to_be_visible()
    screenshot(page, "execution")

    nav(page, "Cluster").click()
    expect(page.get_by_role("heading", name="Members")).to_be_visible()
    expect(page.get_by_role("heading", name="Ownership spread")).to_be_visible()
    page.get_by_label("Which instance owns a job?").fill("page-tour")
    _, cluster = server.call("GET", "/api/v1/cluster")
    owner = next(j["owner"] for j in cluster["jobs"] if j["name"] == "page-tour")
    assert owner == cluster["selfInstance"], cluster
    expect(row(page, "page-tour").locator("td").nth(1)).to_have_text(owner)
    screenshot(page, "cluster")

    # Readable on a phone: no page is wider than the screen (wide tables scroll inside).
    page.set_viewport_size({"width": 390, "height": 844})
    for hash_ in ["#/overview", "#/jobs", "#/jobs/page-tour", f"#/executions/{done['traceId']}",
                  "#/executions", "#/executors", "#/cluster", "#/jobs/page-tour/edit", "#/tokens",
                  "#/audit"]:
        page.goto(server.base + "/ui/" + hash_)
        expect(page.locator("main h1")).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{hash_} is {width}px wide on a 390px screen"
    page.goto(server.base + "/ui/#/jobs/page-tour")
    expect(page.locator(".fire-times li")).to_have_count(10)
    screenshot(page, "phone")


# What the first visit costs: every console file, gzipped, plus the API calls of the page.
# 40 KB until the namespace selector and the labels of the tokens and audit pages came (their
# scripts load only when shown); about 43 KB since.
PAGE_WEIGHT_BUDGET = 45_000


def check_page_weight(transfers):
    files = [r for r in transfers if "/ui/" in r.url]
    assert len(files) >= 15, [r.url for r in files]
    total = 0
    for r in transfers:
        sizes = r.sizes()
        total += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        # The favicon is smaller than its gzip encoding and goes as it is.
        if "/ui/" in r.url and not r.url.endswith(".svg"):
            encoding = r.response().header_value("content-encoding")
            assert encoding == "gzip", f"{r.url} was sent {encoding or 'uncompressed'}"
    print(f"\nfirst visit to the overview: {len(transfers)} requests, {total} bytes transferred")
    assert total < PAGE_WEIGHT_BUDGET, total
