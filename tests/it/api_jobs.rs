//! Job CRUD through the REST API.

use serde_json::json;

use crate::helpers::{Backend, TestApp, backend_tests, job, params_of_len, problem_fields};

backend_tests!(
    create_then_get_returns_the_job_with_defaults,
    duplicate_name_is_409,
    list_filters_and_pages,
    a_list_with_summaries_needs_no_call_per_job,
    update_replaces_the_definition,
    a_put_without_shard_count_keeps_the_jobs,
    a_merge_patch_changes_only_the_fields_it_names,
    concurrent_patches_of_different_fields_all_land,
    delete_removes_the_job,
    enable_and_disable,
    sharded_job_params_round_trip,
    job_params_fit_their_column,
    names_in_any_script_are_jobs_reachable_by_their_encoded_path,
    a_service_group_is_kept_patched_and_validated,
);

async fn create_then_get_returns_the_job_with_defaults(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let resp = app
        .client
        .post(app.url("/api/v1/jobs"))
        .json(&job("order-sync"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["location"], "/api/v1/jobs/order-sync");
    let created: serde_json::Value = resp.json().await.unwrap();
    for (k, v) in [
        ("name", json!("order-sync")),
        ("serviceName", json!("order-service")),
        ("handler", json!("syncOrders")),
        ("cron", json!("0 0 2 * * ?")),
        ("timezone", json!("UTC")),
        ("enabled", json!(true)),
        ("shardCount", json!(1)),
        ("shardStrategy", json!("MOD_HASH")),
        ("timeoutSeconds", json!(300)),
        ("maxRetry", json!(3)),
        ("misfirePolicy", json!("FIRE_ONCE_NOW")),
    ] {
        assert_eq!(created[k], v, "{k}");
    }
    assert!(created["id"].as_i64().unwrap() > 0);
    assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));
    let (status, got) = app.get("/api/v1/jobs/order-sync").await;
    assert_eq!(status, 200);
    assert_eq!(got, created);
}

async fn duplicate_name_is_409(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("dup")).await;
    let (status, body) = app.post("/api/v1/jobs", &job("dup")).await;
    assert_eq!(status, 409);
    assert_eq!(body["status"], 409);
    // Names are case-sensitive (their hash is): a different case is a different job.
    app.create_job(&job("DUP")).await;
}

async fn list_filters_and_pages(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for i in 0..5 {
        let mut j = job(&format!("report_{i}"));
        j["serviceName"] = json!(if i % 2 == 0 {
            "report-service"
        } else {
            "billing-service"
        });
        j["enabled"] = json!(i != 4);
        app.create_job(&j).await;
    }
    // `_` in a prefix is literal, not a LIKE wildcard.
    app.create_job(&job("reportX1")).await;

    let (status, page) = app.get("/api/v1/jobs?size=2&page=1").await;
    assert_eq!(status, 200);
    assert_eq!(page["totalElements"], 6);
    assert_eq!(page["totalPages"], 3);
    assert_eq!(page["number"], 1);
    let names: Vec<_> = page["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    // Byte order on both backends: `X` sorts before `_`.
    assert_eq!(names, ["report_1", "report_2"]);

    let (_, page) = app.get("/api/v1/jobs?serviceName=report-service").await;
    assert_eq!(page["totalElements"], 3);
    let (_, page) = app
        .get("/api/v1/jobs?serviceName=report-service&enabled=true")
        .await;
    assert_eq!(page["totalElements"], 2);
    let (_, page) = app.get("/api/v1/jobs?enabled=false").await;
    assert_eq!(page["content"][0]["name"], "report_4");
    let (_, page) = app.get("/api/v1/jobs?namePrefix=report_").await;
    assert_eq!(page["totalElements"], 5);
    let (_, page) = app.get("/api/v1/jobs?namePrefix=nothing").await;
    assert_eq!(page["totalElements"], 0);
    assert_eq!(page["content"], json!([]));
}

async fn update_replaces_the_definition(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app.create_job(&job("upd")).await;
    let body = json!({
        "serviceName": "other-service", "handler": "h2", "cron": "0 */5 * * * ?",
        "timezone": "Asia/Shanghai", "shardCount": 4, "maxRetry": 0, "description": "five-minutely"
    });
    let (status, updated) = app.put("/api/v1/jobs/upd", &body).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["serviceName"], "other-service");
    assert_eq!(updated["timezone"], "Asia/Shanghai");
    assert_eq!(updated["shardCount"], 4);
    assert_eq!(updated["maxRetry"], 0);
    assert_eq!(updated["timeoutSeconds"], 300);
    assert_eq!(updated["id"], created["id"]);
    assert_eq!(updated["createdAt"], created["createdAt"]);
    let (_, got) = app.get("/api/v1/jobs/upd").await;
    assert_eq!(got, updated);

    let mut renamed = body.clone();
    renamed["name"] = json!("other");
    let (status, problem) = app.put("/api/v1/jobs/upd", &renamed).await;
    assert_eq!(status, 400);
    assert_eq!(problem["errors"][0]["field"], "name");
    let (status, _) = app.put("/api/v1/jobs/missing", &body).await;
    assert_eq!(status, 404);
}

/// The ranges' ids depend on `shardCount`: a `PUT` that leaves it out keeps the job's (it
/// reset the job to one range before).
async fn a_put_without_shard_count_keeps_the_jobs(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut sharded = job("sharded");
    sharded["shardCount"] = json!(8);
    app.create_job(&sharded).await;
    let body = json!({"serviceName": "order-service", "handler": "h2", "cron": "0 0 3 * * ?"});
    let (status, updated) = app.put("/api/v1/jobs/sharded", &body).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["shardCount"], 8);
    assert_eq!(updated["handler"], "h2");
    assert_eq!(
        updated["maxRetry"], 3,
        "other omitted fields take their defaults"
    );
    let mut two = body.clone();
    two["shardCount"] = json!(2);
    let (_, updated) = app.put("/api/v1/jobs/sharded", &two).await;
    assert_eq!(updated["shardCount"], 2, "given, it is changed");
}

/// `PATCH` takes a JSON merge patch (RFC 7396) of the definition: the fields it names change,
/// the others keep their values, `null` resets one to its default; it is validated like a
/// `PUT`, names its bad fields, and refuses a rename.
async fn a_merge_patch_changes_only_the_fields_it_names(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut body = job("patched");
    body["shardCount"] = json!(4);
    body["maxRetry"] = json!(7);
    body["description"] = json!("nightly");
    body["jobParams"] = json!({"region": "eu", "limit": 10});
    let created = app.create_job(&body).await;
    let patch = |body: serde_json::Value, content_type: &'static str| {
        let req = app
            .client
            .patch(app.url("/api/v1/jobs/patched"))
            .header("content-type", content_type)
            .body(body.to_string());
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (status, patched) = patch(
        json!({"cron": "0 0 4 * * ?", "jobParams": {"limit": null, "day": 1}, "description": null}),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["cron"], "0 0 4 * * ?");
    assert_eq!(patched["jobParams"], json!({"region": "eu", "day": 1}));
    assert_eq!(patched["description"], json!(null));
    for kept in [
        "shardCount",
        "maxRetry",
        "serviceName",
        "handler",
        "id",
        "createdAt",
    ] {
        assert_eq!(patched[kept], created[kept], "{kept}");
    }
    let (_, got) = app.get("/api/v1/jobs/patched").await;
    assert_eq!(got, patched);
    // An empty patch leaves the definition as it is.
    let (status, same) = patch(json!({}), "application/json").await;
    assert_eq!(status, 200);
    for (k, v) in patched.as_object().unwrap() {
        if k != "updatedAt" {
            assert_eq!(&same[k], v, "{k}");
        }
    }
    // `null` resets a field to its default.
    let (_, reset) = patch(json!({"maxRetry": null}), "application/json").await;
    assert_eq!(reset["maxRetry"], 3);
    let (status, problem) = patch(json!({"shardCount": 0}), "application/json").await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["shardCount"]);
    let (status, problem) = patch(json!({"maxRetry": "many"}), "application/json").await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["maxRetry"]);
    let (status, problem) = patch(json!({"name": "renamed"}), "application/json").await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["name"]);
    // A member that is no field of a job is refused and named, even null (which a merge
    // patch alone would take as removing nothing), and nothing is written.
    for (unknown, named) in [
        (json!({"noSuchField": 1}), "noSuchField"),
        (json!({"cronn": null, "maxRetry": 5}), "cronn"),
    ] {
        let (status, problem) = patch(unknown.clone(), "application/json").await;
        assert_eq!(status, 400, "{unknown}: {problem}");
        assert_eq!(problem_fields(&problem), [named]);
    }
    let (_, unchanged) = app.get("/api/v1/jobs/patched").await;
    assert_eq!(
        unchanged["maxRetry"], 3,
        "the refused patch changed nothing"
    );
    let (status, _) = patch(json!([1]), "application/json").await;
    assert_eq!(status, 400);
    let (status, _) = patch(json!({"cron": "0 0 5 * * ?"}), "text/plain").await;
    assert_eq!(status, 415);
    let req = app
        .client
        .patch(app.url("/api/v1/jobs/none"))
        .json(&json!({"maxRetry": 1}));
    assert_eq!(req.send().await.unwrap().status(), 404);
}

/// A patch is applied to the job as stored when it is written: patches sent at once, each
/// adding its own key, all land (none overwrites another with what it read before).
async fn concurrent_patches_of_different_fields_all_land(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("busy")).await;
    let sends = (0..4).map(|i| {
        app.client
            .patch(app.url("/api/v1/jobs/busy"))
            .json(&json!({"jobParams": {format!("k{i}"): i}}))
            .send()
    });
    for resp in futures::future::join_all(sends).await {
        assert_eq!(resp.unwrap().status(), 200);
    }
    let (_, got) = app.get("/api/v1/jobs/busy").await;
    assert_eq!(
        got["jobParams"],
        json!({"k0": 0, "k1": 1, "k2": 2, "k3": 3})
    );
}

async fn delete_removes_the_job(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("gone")).await;
    let (status, body) = app.delete("/api/v1/jobs/gone").await;
    assert_eq!((status, body), (204, serde_json::Value::Null));
    let (status, _) = app.get("/api/v1/jobs/gone").await;
    assert_eq!(status, 404);
    let (status, problem) = app.delete("/api/v1/jobs/gone").await;
    assert_eq!(status, 404);
    assert_eq!(problem["status"], 404);
    // The name is free again.
    app.create_job(&job("gone")).await;
}

async fn enable_and_disable(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("toggle")).await;
    let (status, j) = app.patch("/api/v1/jobs/toggle/enabled?enabled=false").await;
    assert_eq!(status, 200);
    assert_eq!(j["enabled"], false);
    let (_, j) = app.get("/api/v1/jobs/toggle").await;
    assert_eq!(j["enabled"], false);
    let (_, j) = app.patch("/api/v1/jobs/toggle/enabled?enabled=true").await;
    assert_eq!(j["enabled"], true);
    let (status, problem) = app.patch("/api/v1/jobs/toggle/enabled?enabled=maybe").await;
    assert_eq!(status, 400, "{problem}");
    let (status, _) = app.patch("/api/v1/jobs/toggle/enabled").await;
    assert_eq!(status, 400);
    let (status, _) = app.patch("/api/v1/jobs/nope/enabled?enabled=true").await;
    assert_eq!(status, 404);
}

async fn sharded_job_params_round_trip(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut j = job("city-report");
    j["shardCount"] = json!(3);
    j["shardStrategy"] = json!("CUSTOM");
    j["shardParams"] = json!("0=Beijing,1=Shanghai,2=Guangzhou");
    j["jobParams"] = json!({"date": "yesterday", "limit": 500, "nested": {"ok": [1, 2]}});
    let created = app.create_job(&j).await;
    assert_eq!(
        created["shardParams"],
        json!({"0": "Beijing", "1": "Shanghai", "2": "Guangzhou"})
    );
    assert_eq!(created["jobParams"], j["jobParams"]);

    let mut r = job("id-range");
    r["shardCount"] = json!(10);
    r["shardStrategy"] = json!("RANGE");
    r["shardParams"] = json!({"start": 1, "end": 1000000});
    let created = app.create_job(&r).await;
    assert_eq!(created["shardParams"], json!({"start": 1, "end": 1000000}));
    let (_, got) = app.get("/api/v1/jobs/id-range").await;
    assert_eq!(got["shardStrategy"], "RANGE");
}

/// `jobParams` are stored in a `TEXT` column: 65,535 bytes fit on every backend, one more is
/// a 400 naming the field (not a database error).
async fn job_params_fit_their_column(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut j = job("big-params");
    j["jobParams"] = params_of_len(65_535);
    let created = app.create_job(&j).await;
    assert_eq!(created["jobParams"], j["jobParams"]);
    let mut j = job("too-big-params");
    j["jobParams"] = params_of_len(65_536);
    let (status, problem) = app.post("/api/v1/jobs", &j).await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), vec!["jobParams"]);
}

/// The design's own job names (Chinese) and names in other scripts are jobs like any other:
/// created, found at their percent-encoded path (the `Location` of their creation), listed,
/// patched and deleted there. Characters that are neither letters nor digits are refused,
/// and the length is counted in characters.
async fn names_in_any_script_are_jobs_reachable_by_their_encoded_path(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let names = [
        ("订单对账", "%E8%AE%A2%E5%8D%95%E5%AF%B9%E8%B4%A6"),
        ("支付对账", "%E6%94%AF%E4%BB%98%E5%AF%B9%E8%B4%A6"),
        ("Überweisung.täglich", "%C3%9Cberweisung.t%C3%A4glich"),
    ];
    for (name, encoded) in names {
        let resp = app
            .client
            .post(app.url("/api/v1/jobs"))
            .json(&job(name))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{name}");
        assert_eq!(
            resp.headers()["location"],
            format!("/api/v1/jobs/{encoded}")
        );
        let (status, got) = app.get(&format!("/api/v1/jobs/{encoded}")).await;
        assert_eq!((status, got["name"].as_str()), (200, Some(name)));
    }
    let long = "账".repeat(100);
    app.create_job(&job(&long)).await;
    let (_, list) = app.get("/api/v1/jobs?size=100").await;
    let listed: Vec<&str> = list["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    for (name, _) in names {
        assert!(listed.contains(&name), "{listed:?}");
    }
    let (status, patched) = app
        .patch_json(
            "/api/v1/jobs/%E8%AE%A2%E5%8D%95%E5%AF%B9%E8%B4%A6",
            &json!({"maxRetry": 1}),
        )
        .await;
    assert_eq!(
        (status, &patched["maxRetry"]),
        (200, &json!(1)),
        "{patched}"
    );
    let (status, _) = app
        .delete("/api/v1/jobs/%E6%94%AF%E4%BB%98%E5%AF%B9%E8%B4%A6")
        .await;
    assert_eq!(status, 204);
    let (status, _) = app
        .get("/api/v1/jobs/%E6%94%AF%E4%BB%98%E5%AF%B9%E8%B4%A6")
        .await;
    assert_eq!(status, 404);
    for bad in ["订单、对账", "订单 对账", "😀", &"账".repeat(101)] {
        let (status, body) = app.post("/api/v1/jobs", &job(bad)).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(problem_fields(&body), ["name"], "{bad}: {body}");
    }
}

/// `serviceGroup` (the Nacos group of the executor service) is null unless given, kept by a
/// merge patch that does not name it, cleared by one that sets it null, and validated as
/// Nacos validates group names.
async fn a_service_group_is_kept_patched_and_validated(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let plain = app.create_job(&job("plain")).await;
    assert_eq!(plain["serviceGroup"], json!(null));
    let mut body = job("grouped");
    body["serviceGroup"] = json!("payments");
    let grouped = app.create_job(&body).await;
    assert_eq!(grouped["serviceGroup"], "payments");
    let (status, patched) = app
        .patch_json("/api/v1/jobs/grouped", &json!({"maxRetry": 0}))
        .await;
    assert_eq!(
        (status, &patched["serviceGroup"]),
        (200, &json!("payments"))
    );
    let (_, got) = app.get("/api/v1/jobs/grouped").await;
    assert_eq!(got["serviceGroup"], "payments");
    let (status, cleared) = app
        .patch_json("/api/v1/jobs/grouped", &json!({"serviceGroup": null}))
        .await;
    assert_eq!((status, &cleared["serviceGroup"]), (200, &json!(null)));
    for bad in [
        json!(""),
        json!("pay ments"),
        json!("组"),
        json!("g".repeat(129)),
    ] {
        let mut body = job("bad-group");
        body["serviceGroup"] = bad.clone();
        let (status, problem) = app.post("/api/v1/jobs", &body).await;
        assert_eq!(status, 400, "{bad}: {problem}");
        assert_eq!(
            problem_fields(&problem),
            ["serviceGroup"],
            "{bad}: {problem}"
        );
    }
}

/// `summary=true` adds each job's next fire time and newest execution to a list page, so the
/// console's Jobs page makes one call whatever the number of rows; without it the page is as
/// before.
async fn a_list_with_summaries_needs_no_call_per_job(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut daily = job("a-daily");
    daily["maxRetry"] = json!(0);
    app.create_job(&daily).await;
    let mut paused = job("b-paused");
    paused["enabled"] = json!(false);
    app.create_job(&paused).await;
    let mut manual = job("c-manual");
    manual.as_object_mut().unwrap().remove("cron");
    manual["scheduleType"] = json!("NONE");
    app.create_job(&manual).await;
    let mut newest = String::new();
    for _ in 0..2 {
        let (status, rows) = app.post("/api/v1/jobs/a-daily/trigger", &json!({})).await;
        assert_eq!(status, 200, "{rows}");
        newest = rows[0]["traceId"].as_str().unwrap().to_string();
    }
    let (_, next) = app
        .get("/api/v1/jobs/a-daily/next-fire-times?count=1")
        .await;

    let (status, page) = app.get("/api/v1/jobs?summary=true").await;
    assert_eq!(status, 200, "{page}");
    let jobs = page["content"].as_array().unwrap();
    assert_eq!(jobs[0]["name"], "a-daily");
    assert_eq!(jobs[0]["cron"], "0 0 2 * * ?", "the job's own fields stay");
    assert_eq!(jobs[0]["summary"]["nextFireTime"], next["fireTimes"][0]);
    assert_eq!(
        jobs[0]["summary"]["lastExecution"]["traceId"],
        newest.as_str()
    );
    assert_eq!(
        jobs[1]["summary"],
        json!({"nextFireTime": null, "lastExecution": null}),
        "disabled, never run"
    );
    assert_eq!(
        jobs[2]["summary"],
        json!({"nextFireTime": null, "lastExecution": null}),
        "fires only on demand"
    );
    let (_, plain) = app.get("/api/v1/jobs").await;
    assert!(plain["content"][0].get("summary").is_none(), "{plain}");
}
