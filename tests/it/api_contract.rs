//! The OpenAPI document is the contract: committed as a snapshot, and checked against what the
//! service does (its validation rules and its answers to missing or weak credentials).
//!
//! `JOBFLOW_UPDATE_SNAPSHOTS=1 cargo test --test it openapi` rewrites the snapshot after a
//! deliberate API change; the diff then shows the change.

use std::sync::Arc;

use jobflow::config::{Role, Secret, TokenSettings};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, job};

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/openapi.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_matches_the_committed_snapshot() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (status, served) = app.get("/api-docs/openapi.json").await;
    assert_eq!(status, 200);
    let text = serde_json::to_string_pretty(&served).unwrap() + "\n";
    if std::env::var_os("JOBFLOW_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(SNAPSHOT, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    if committed != text {
        let diff = committed
            .lines()
            .zip(text.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| format!("line {}: committed `{a}`, served `{b}`", i + 1))
            .unwrap_or_else(|| "the lengths differ".into());
        panic!(
            "the served OpenAPI document differs from tests/snapshots/openapi.json ({diff}); \
             if the change is deliberate, rerun with JOBFLOW_UPDATE_SNAPSHOTS=1 and commit the file"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A small JSON Schema evaluator for the keywords the document uses on request input.

struct Schemas<'a>(&'a Value);

impl Schemas<'_> {
    fn resolve<'s>(&'s self, s: &'s Value) -> &'s Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => self
                .0
                .pointer(r.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("dangling {r}")),
            None => s,
        }
    }

    /// Whether `v` satisfies `schema`.
    fn valid(&self, schema: &Value, v: &Value) -> bool {
        let s = self.resolve(schema);
        if let Some(one_of) = s.get("oneOf").and_then(Value::as_array)
            && one_of.iter().filter(|o| self.valid(o, v)).count() != 1
        {
            return false;
        }
        if let Some(types) = s.get("type") {
            let types: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            };
            let ok = types.iter().any(|t| match *t {
                "string" => v.is_string(),
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                "array" => v.is_array(),
                "object" => v.is_object(),
                "null" => v.is_null(),
                _ => false,
            });
            if !ok {
                return false;
            }
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array)
            && !e.contains(v)
        {
            return false;
        }
        if let Some(not) = s.get("not")
            && self.valid(not, v)
        {
            return false;
        }
        if let Some(text) = v.as_str() {
            let len = text.chars().count() as u64;
            if s["minLength"].as_u64().is_some_and(|m| len < m)
                || s["maxLength"].as_u64().is_some_and(|m| len > m)
            {
                return false;
            }
            if let Some(p) = s["pattern"].as_str()
                && !regex::Regex::new(p).unwrap().is_match(text)
            {
                return false;
            }
            if s["format"] == "date-time"
                && !(rfc3339_date_time().is_match(text)
                    && chrono::NaiveDate::parse_from_str(&text[..10], "%Y-%m-%d").is_ok())
            {
                return false;
            }
        }
        if let Some(n) = v.as_f64()
            && (s["minimum"].as_f64().is_some_and(|m| n < m)
                || s["maximum"].as_f64().is_some_and(|m| n > m))
        {
            return false;
        }
        if let Some(items) = v.as_array() {
            if s["maxItems"]
                .as_u64()
                .is_some_and(|m| items.len() as u64 > m)
            {
                return false;
            }
            if s["uniqueItems"] == true && (1..items.len()).any(|i| items[..i].contains(&items[i]))
            {
                return false;
            }
            if let Some(item) = s.get("items")
                && !items.iter().all(|i| self.valid(item, i))
            {
                return false;
            }
        }
        true
    }
}

/// RFC 3339 `date-time`, the JSON Schema format.
fn rfc3339_date_time() -> regex::Regex {
    regex::Regex::new(
        r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$",
    )
    .unwrap()
}

/// Strings that probe patterns and lengths: names, separators, dots, non-ASCII, whitespace.
fn string_probes(schema: &Value) -> Vec<Value> {
    let mut out: Vec<String> = [
        "a",
        "order-sync",
        "A-z.0:_",
        "pay:recon-2024_v1",
        "a b",
        "a/b",
        "a\\b",
        "..",
        ".",
        "a..b",
        ".a.",
        "a.",
        "é",
        "%2e",
        "a?b",
        "a#b",
        "executions",
        "~!$&'()*+,;=@[]",
        "tab\there",
        "10.0.0.7:9001",
        "Asia/Shanghai",
        "asia/shanghai",
        "Nowhere/City",
        "UTC",
        "0 0 2 * * ?",
        " ",
        "",
        "2026-01-31T00:00:00Z",
        "2026-01-31T08:00:00.123+08:00",
        "2026-01-31t00:00:00z",
        "2026-01-31 00:00:00Z",
        "2026-01-31T00:00:00",
        "2026-02-30T00:00:00Z",
        "2026-01-31T24:00:00Z",
        "2026-01-31",
    ]
    .map(str::to_string)
    .to_vec();
    for key in ["minLength", "maxLength"] {
        if let Some(n) = schema[key].as_u64() {
            for len in [n.saturating_sub(1), n, n + 1] {
                out.push("a".repeat(len as usize));
                out.push("é".repeat(len as usize));
            }
        }
    }
    out.into_iter().map(Value::String).collect()
}

fn integer_probes(schema: &Value) -> Vec<Value> {
    let mut out = vec![json!(-1), json!(0), json!(1)];
    for key in ["minimum", "maximum"] {
        if let Some(n) = schema[key].as_i64() {
            out.extend([json!(n - 1), json!(n), json!(n + 1)]);
        }
    }
    out
}

/// Values to try for a property or parameter of `schema` (resolved), by its type.
fn probes(schemas: &Schemas, schema: &Value) -> Vec<Value> {
    let s = schemas.resolve(schema);
    let variants: Vec<&Value> = match s.get("oneOf").and_then(Value::as_array) {
        Some(v) => v.iter().map(|v| schemas.resolve(v)).collect(),
        None => vec![s],
    };
    let mut out = vec![Value::Null];
    for v in variants {
        let ty = match &v["type"] {
            Value::Array(a) => a.iter().find(|t| *t != "null").cloned().unwrap_or_default(),
            t => t.clone(),
        };
        match ty.as_str() {
            Some("string") => {
                out.extend(string_probes(v));
                if let Some(e) = v["enum"].as_array() {
                    out.extend(e.iter().take(3).cloned());
                }
            }
            Some("integer") => out.extend(integer_probes(v)),
            Some("array") => {
                let items = string_probes(&v["items"]);
                out.push(json!([]));
                out.extend(items.iter().map(|i| json!([i])));
                out.push(json!(["a", "a"]));
                if let Some(max) = v["maxItems"].as_u64() {
                    for n in [max, max + 1] {
                        out.push(Value::Array(
                            (0..n).map(|i| json!(format!("n{i}"))).collect(),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Every constrained property of the job body: the schema accepts a value exactly when the
/// service's validation accepts it for that field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_body_schema_and_validation_agree() {
    let doc = jobflow::api::openapi();
    let schemas = Schemas(&doc);
    let body = &doc["components"]["schemas"]["JobCreateRequest"];
    assert_eq!(body["additionalProperties"], false);
    let utc = jobflow::jobs::TimeZoneName::parse("UTC").unwrap();
    let mut checked = 0;
    for (field, schema) in body["properties"].as_object().unwrap() {
        // Semantic rules (cron, shard parameters) are beyond the schema by design; any JSON is
        // a valid jobParams.
        if ["cron", "shardParams", "jobParams"].contains(&field.as_str()) {
            continue;
        }
        for value in probes(&schemas, schema) {
            let mut req = job("probe");
            // The fields of another schedule type are probed in a job of that type, which
            // requires its interval (a rule across fields, beyond the schema).
            if field == "intervalSeconds" && value.is_null() {
                continue;
            }
            if ["intervalSeconds", "startAt"].contains(&field.as_str()) {
                let fields = req.as_object_mut().unwrap();
                fields.remove("cron");
                fields.insert("scheduleType".into(), json!("FIXED_RATE"));
                fields.insert("intervalSeconds".into(), json!(60));
            }
            req[field] = value.clone();
            let required = body["required"].as_array().unwrap().contains(&json!(field));
            let schema_ok = schemas.valid(schema, &value) && !(required && value.is_null());
            let service_ok = match serde_json::from_value::<jobflow::jobs::JobRequest>(req) {
                Err(_) => false,
                Ok(r) => {
                    match jobflow::jobs::JobSpec::parse(r, None, None, utc, chrono::Utc::now()) {
                        Ok(_) => true,
                        Err(errors) => !errors.iter().any(|e| &e.field == field),
                    }
                }
            };
            assert_eq!(
                schema_ok, service_ok,
                "{field} = {value}: the schema says {schema_ok}, the validation {service_ok}"
            );
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} probes");
    // Unknown fields are refused, as additionalProperties: false says.
    let mut req = job("probe");
    req["shardcount"] = json!(2);
    assert!(serde_json::from_value::<jobflow::jobs::JobRequest>(req).is_err());
}

/// Every constrained query parameter of every GET operation, over HTTP: a value is answered
/// 400 naming the parameter exactly when the schema refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_schema_and_validation_agree() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.create_job(&job("probe")).await;
    let (_, doc) = app.get("/api-docs/openapi.json").await;
    let schemas = Schemas(&doc);
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        let url = path.replace("{name}", "probe");
        for p in params.iter().filter(|p| p["in"] == "query") {
            let name = p["name"].as_str().unwrap();
            // The cron expression's rules are beyond the schema by design, and so is a
            // calendar's (it must be configured).
            if name == "cron" || name == "calendar" {
                continue;
            }
            for value in probes(&schemas, &p["schema"]) {
                if value.is_null() {
                    continue;
                }
                let text = match &value {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                let mut query: Vec<(String, String)> = params
                    .iter()
                    .filter(|o| o["in"] == "query" && o["required"] == true && o["name"] != name)
                    .map(|o| (o["name"].as_str().unwrap().into(), "0 0 2 * * ?".into()))
                    .collect();
                // The schedule preview needs a schedule: a cron, or for the fields of a
                // fixed rate, a fixed rate.
                if path == "/api/v1/cron/next-fire-times" {
                    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
                    match name {
                        "intervalSeconds" => query.push(pair("scheduleType", "FIXED_RATE")),
                        "startAt" => query.extend([
                            pair("scheduleType", "FIXED_RATE"),
                            pair("intervalSeconds", "60"),
                        ]),
                        _ => query.push(pair("cron", "0 0 2 * * ?")),
                    }
                }
                query.push((name.into(), text.clone()));
                let resp = app
                    .client
                    .get(app.url(&url))
                    .query(&query)
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                let problem: Value = resp.json().await.unwrap_or(Value::Null);
                let named = status == 400 && crate::helpers::problem_fields(&problem) == [name];
                let schema_ok = schemas.valid(&p["schema"], &value);
                assert_eq!(
                    !schema_ok, named,
                    "GET {url}?{name}={text}: schema valid {schema_ok}, answered {status} {problem}"
                );
                assert!(
                    status < 500 && (schema_ok || status == 400),
                    "GET {url}?{name}={text}: {status}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} probes");
}

const VIEWER: &str = "contract-viewer-token-0123456789";
const ADMIN: &str = "contract-admin-token-0123456789";

/// Every operation of the document, without a token and with a viewer's: 401 exactly where
/// the document lists it, 403 exactly where it lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_auth_statuses_are_the_answered_ones() {
    let db = Arc::new(TestDb::create(Backend::Sqlite).await);
    let app = TestApp::spawn_with(db, |s| {
        // /metrics documents its 401 for this setting.
        s.auth.protect_metrics = true;
        s.auth.tokens = [("vera", Role::Viewer, VIEWER), ("ada", Role::Admin, ADMIN)]
            .map(|(name, role, token)| TokenSettings {
                name: name.into(),
                role,
                token: Some(Secret::new(token)),
                ..Default::default()
            })
            .to_vec();
    })
    .await;
    let (_, doc) = app.get("/api-docs/openapi.json").await;
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let url = path
                .replace("{name}", "probe")
                .replace("{traceId}", "0123456789abcdef0123456789abcdef");
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let documented = |s: &str| op["responses"].get(s).is_some();
            for (token, expected) in [(None, "401"), (Some(VIEWER), "403")] {
                let mut req = app.client.request(method.clone(), app.url(&url));
                if let Some(t) = token {
                    req = req.bearer_auth(t);
                }
                if op.get("requestBody").is_some() {
                    req = req.json(&json!({}));
                }
                let status = req.send().await.unwrap().status().as_u16().to_string();
                assert_eq!(
                    status == expected,
                    documented(expected),
                    "{method} {path} with {token:?}: answered {status}, documented {:?}",
                    op["responses"]
                        .as_object()
                        .unwrap()
                        .keys()
                        .collect::<Vec<_>>()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} requests");
}
