//! The OpenAPI document as an exact contract, for fuzzers and client generators.
//!
//! utoipa generates the document from the handlers; this module completes it where the
//! derive cannot reach:
//! - every validation rule the service applies, taken from the constant the validation uses
//!   (name patterns and lengths, numeric ranges, list sizes, the time zone names, refused
//!   unknown fields), so the schema and the checks cannot drift apart;
//! - every status an operation can answer, with the problem+json schema: 400 where input is
//!   parsed, 401 and 403 from the operation's security (its bearer scopes name the role),
//!   404 under path parameters, 413 and 415 where a body is read, 503 where the database is.
//!
//! Rules the schema cannot state (a cron expression must parse and fire in the future, shard
//! parameters depend on the strategy, child jobs must exist, an update must not rename) are
//! in the field descriptions; they answer 400 naming the field.

use serde_json::{Map, Value, json};

use super::audit;
use super::execution_search::MAX_EXECUTOR_LEN;
use super::executions::MAX_REPORT_MESSAGE;
use super::jobs::{MAX_FILTER_LEN, MAX_FIRE_TIMES};
use super::tokens::{MAX_TOKEN_NAME, MAX_TOKEN_NAMESPACES, TOKEN_NAME_PATTERN};
use super::{MAX_PAGE, MAX_PAGE_SIZE};
use crate::jobs::log::{LEVELS, MAX_BATCH_LINES, MAX_LINE_CHARS, MAX_SAFE_INTEGER};
use crate::jobs::{
    ChannelName, CronSchedule, JobName, MAX_ALERT_CHANNELS, MAX_CHILD_JOBS, MAX_DESCRIPTION,
    MAX_RETRY, MAX_SERVICE_GROUP, MAX_SHARD_COUNT, MAX_TIMEOUT_SECONDS, Namespace, PathSegment,
    SERVICE_GROUP_PATTERN, backfill,
};

/// The request body schemas whose Rust types refuse unknown fields.
const CLOSED_SCHEMAS: [&str; 10] = [
    "BackfillRequest",
    "TokenRequest",
    "LogBatch",
    "ShippedEnd",
    "ShippedLine",
    "JobRequest",
    "JobCreateRequest",
    PATCH_SCHEMA,
    "ResultReport",
    "TriggerRequest",
];

/// The body of `POST /api/v1/jobs`: a [`JobRequest`](crate::jobs::JobRequest) whose `name`
/// is required (on `PUT` it comes from the path).
const CREATE_SCHEMA: &str = "JobCreateRequest";
/// The body of `PATCH /api/v1/jobs/{name}`: a merge patch of a `JobRequest`.
const PATCH_SCHEMA: &str = "JobPatch";

/// The completed document (see the module documentation).
pub fn document(doc: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serialises");
    add_time_zones(&mut doc);
    for (schema, property, rule) in property_rules() {
        let target = doc
            .pointer_mut(&format!(
                "/components/schemas/{schema}/properties/{property}"
            ))
            .unwrap_or_else(|| panic!("{schema}.{property} is not in the document"));
        merge(target, rule);
    }
    let params = param_rules();
    for_each_operation(&mut doc, |_, _, op| {
        let Some(list) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
            return;
        };
        for p in list.iter_mut().filter(|p| p["in"] == "query") {
            let name = p["name"].as_str().unwrap_or_default().to_string();
            if let Some((_, rule)) = params.iter().find(|(n, _)| *n == name) {
                merge(&mut p["schema"], rule.clone());
            }
        }
    });
    derive_create_schema(&mut doc);
    derive_patch_schema(&mut doc);
    reference_page_items(&mut doc);
    for name in CLOSED_SCHEMAS {
        if let Some(s) = doc.pointer_mut(&format!("/components/schemas/{name}")) {
            s["additionalProperties"] = Value::Bool(false);
        }
    }
    add_problem_responses(&mut doc);
    doc
}

/// Constraints of request body properties: (schema, property, constraint).
fn property_rules() -> Vec<(&'static str, &'static str, Value)> {
    let job_name = job_name_rule();
    let segment = json!({
        "minLength": 1, "maxLength": PathSegment::MAX_LEN, "pattern": PathSegment::PATTERN,
    });
    vec![
        ("JobRequest", "name", job_name.clone()),
        ("JobRequest", "serviceName", segment.clone()),
        (
            "JobRequest",
            "serviceGroup",
            json!({"minLength": 1, "maxLength": MAX_SERVICE_GROUP, "pattern": SERVICE_GROUP_PATTERN}),
        ),
        ("JobRequest", "handler", segment),
        (
            "JobRequest",
            "cron",
            json!({"minLength": 1, "maxLength": CronSchedule::MAX_LEN, "pattern": r"\S"}),
        ),
        (
            "JobRequest",
            "shardCount",
            json!({"minimum": 1, "maximum": MAX_SHARD_COUNT}),
        ),
        (
            "JobRequest",
            "timeoutSeconds",
            json!({"minimum": 1, "maximum": MAX_TIMEOUT_SECONDS}),
        ),
        (
            "JobRequest",
            "maxRetry",
            json!({"minimum": 0, "maximum": MAX_RETRY}),
        ),
        (
            "JobRequest",
            "description",
            json!({"maxLength": MAX_DESCRIPTION}),
        ),
        (
            "JobRequest",
            "childJobs",
            json!({"maxItems": MAX_CHILD_JOBS, "uniqueItems": true, "items": job_name}),
        ),
        (
            "JobRequest",
            "alertChannels",
            json!({
                "maxItems": MAX_ALERT_CHANNELS, "uniqueItems": true,
                "items": config_name_rule(),
            }),
        ),
        ("JobRequest", "calendar", config_name_rule()),
        ("JobRequest", "namespace", namespace_rule()),
        (
            "TokenRequest",
            "name",
            json!({"minLength": 1, "maxLength": MAX_TOKEN_NAME, "pattern": TOKEN_NAME_PATTERN}),
        ),
        (
            "TokenRequest",
            "namespaces",
            json!({"minItems": 1, "maxItems": MAX_TOKEN_NAMESPACES, "items": namespace_rule()}),
        ),
        (
            "BackfillRequest",
            "backfillId",
            json!({"minLength": 1, "maxLength": backfill::MAX_ID, "pattern": backfill::ID_PATTERN}),
        ),
        (
            "BackfillRequest",
            "maxPerSecond",
            json!({"minimum": 1, "maximum": backfill::MAX_PER_SECOND}),
        ),
        (
            "ResultReport",
            "message",
            json!({"maxLength": MAX_REPORT_MESSAGE}),
        ),
        ("LogBatch", "lines", json!({"maxItems": MAX_BATCH_LINES})),
        (
            "ShippedLine",
            "seq",
            json!({"minimum": 1, "maximum": MAX_SAFE_INTEGER}),
        ),
        ("ShippedLine", "level", json!({"enum": LEVELS})),
        (
            "ShippedLine",
            "message",
            json!({"maxLength": MAX_LINE_CHARS}),
        ),
        (
            "ShippedEnd",
            "lines",
            json!({"minimum": 0, "maximum": MAX_SAFE_INTEGER}),
        ),
        (
            "ShippedEnd",
            "droppedBytes",
            json!({"minimum": 0, "maximum": MAX_SAFE_INTEGER}),
        ),
    ]
}

/// Constraints of query parameters, by name (a name means the same on every operation).
fn param_rules() -> Vec<(&'static str, Value)> {
    vec![
        ("page", json!({"minimum": 0, "maximum": MAX_PAGE})),
        ("size", json!({"minimum": 1, "maximum": MAX_PAGE_SIZE})),
        ("count", json!({"minimum": 1, "maximum": MAX_FIRE_TIMES})),
        (
            "cron",
            json!({"minLength": 1, "maxLength": CronSchedule::MAX_LEN, "pattern": r"\S"}),
        ),
        ("jobName", job_name_rule()),
        (
            "executor",
            json!({"minLength": 1, "maxLength": MAX_EXECUTOR_LEN}),
        ),
        ("serviceName", json!({"maxLength": MAX_FILTER_LEN})),
        ("calendar", config_name_rule()),
        ("namePrefix", json!({"maxLength": MAX_FILTER_LEN})),
        ("namespace", namespace_rule()),
        (
            "actor",
            json!({"minLength": 1, "maxLength": audit::MAX_FILTER_LEN}),
        ),
        (
            "target",
            json!({"minLength": 1, "maxLength": audit::MAX_FILTER_LEN}),
        ),
    ]
}

fn namespace_rule() -> Value {
    json!({"minLength": 1, "maxLength": Namespace::MAX_LEN, "pattern": Namespace::PATTERN})
}

/// A name from configuration: an alert channel's or a calendar's.
fn config_name_rule() -> Value {
    json!({"minLength": 1, "maxLength": ChannelName::MAX_LEN, "pattern": ChannelName::PATTERN})
}

fn job_name_rule() -> Value {
    json!({
        "minLength": 1, "maxLength": JobName::MAX_LEN, "pattern": JobName::PATTERN,
        "not": {"enum": JobName::RESERVED},
    })
}

/// `TimeZone`: the IANA names the service knows, referenced wherever a zone is given.
fn add_time_zones(doc: &mut Value) {
    let names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
    doc["components"]["schemas"]["TimeZone"] = json!({
        "type": "string",
        "description": "An IANA time zone name.",
        "enum": names,
        "x-enum-varnames": enum_var_names(&names),
    });
    let zone = json!({"$ref": "#/components/schemas/TimeZone"});
    if let Some(p) = doc.pointer_mut("/components/schemas/JobRequest/properties/timezone") {
        let description = p["description"].take();
        *p = json!({"oneOf": [zone, {"type": "null"}], "description": description});
    }
    for_each_operation(doc, |_, _, op| {
        if let Some(list) = op.get_mut("parameters").and_then(Value::as_array_mut) {
            for p in list.iter_mut().filter(|p| p["name"] == "timezone") {
                p["schema"] = zone.clone();
            }
        }
    });
}

/// `Page_X.content` lists `X` by reference (utoipa inlines a generic's argument), so a
/// generated client has one `Execution` type, not one per page.
fn reference_page_items(doc: &mut Value) {
    let names: Vec<String> = doc["components"]["schemas"]
        .as_object()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default();
    for page in names.iter().filter(|n| n.starts_with("Page_")) {
        let item = &page["Page_".len()..];
        if names.iter().any(|n| n == item) {
            doc["components"]["schemas"][page]["properties"]["content"]["items"] =
                json!({"$ref": format!("#/components/schemas/{item}")});
        }
    }
}

/// Distinct identifiers for enum values, for client generators (`x-enum-varnames`):
/// `Etc/GMT+1` and `Etc/GMT-1` must not both become `ETC_GMT1`.
fn enum_var_names(values: &[&str]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    values
        .iter()
        .map(|v| {
            let mut name = String::new();
            let chars: Vec<char> = v.chars().collect();
            for (i, c) in chars.iter().enumerate() {
                let before_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
                match c {
                    '+' if before_digit => name.push_str("_PLUS_"),
                    '-' if before_digit => name.push_str("_MINUS_"),
                    c if c.is_ascii_alphanumeric() => name.push(c.to_ascii_uppercase()),
                    _ => name.push('_'),
                }
            }
            let base = name.clone();
            let mut n = 2;
            while !seen.insert(name.clone()) {
                name = format!("{base}_{n}");
                n += 1;
            }
            name
        })
        .collect()
}

/// `JobCreateRequest` = `JobRequest` with a required, non-null `name`; the create operation
/// takes it.
fn derive_create_schema(doc: &mut Value) {
    let Some(mut create) = doc.pointer("/components/schemas/JobRequest").cloned() else {
        return;
    };
    create["description"] = json!("Create a job. Absent optional fields take their defaults.");
    if let Some(required) = create["required"].as_array_mut() {
        required.insert(0, json!("name"));
    }
    create["properties"]["name"]["type"] = json!("string");
    create["properties"]["name"]["description"] = json!(
        "1-100 characters, each a letter or a digit of any script (Unicode L and N) or one of `. _ : -`; not `executions`. Percent-encoded UTF-8 in a URL path."
    );
    doc["components"]["schemas"][CREATE_SCHEMA] = create;
    if let Some(body) =
        doc.pointer_mut("/paths/~1api~1v1~1jobs/post/requestBody/content/application~1json/schema")
    {
        *body = json!({"$ref": format!("#/components/schemas/{CREATE_SCHEMA}")});
    }
}

/// `JobPatch` = `JobRequest` with nothing required: the JSON merge patch (RFC 7396) the
/// patch operation takes. A field set to null takes its default; one left out keeps its value.
fn derive_patch_schema(doc: &mut Value) {
    let Some(mut patch) = doc.pointer("/components/schemas/JobRequest").cloned() else {
        return;
    };
    patch["description"] = json!(
        "A JSON merge patch (RFC 7396) of a job: the fields to change, as in `JobRequest`. A field set to null takes its default; one left out keeps its value."
    );
    if let Some(fields) = patch.as_object_mut() {
        fields.remove("required");
    }
    doc["components"]["schemas"][PATCH_SCHEMA] = patch;
    if let Some(body) = doc.pointer_mut(
        "/paths/~1api~1v1~1jobs~1{name}/patch/requestBody/content/application~1merge-patch+json/schema",
    ) {
        *body = json!({"$ref": format!("#/components/schemas/{PATCH_SCHEMA}")});
    }
}

/// The statuses every operation can answer beyond its own (see the module documentation).
fn add_problem_responses(doc: &mut Value) {
    let global_security = doc["security"].clone();
    for_each_operation(doc, |path, _, op| {
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        let has_query = params.iter().any(|p| p["in"] == "query");
        let has_path = params.iter().any(|p| p["in"] == "path");
        let has_body = op.get("requestBody").is_some();
        let security = op.get("security").unwrap_or(&global_security).clone();
        let requirements = security.as_array().cloned().unwrap_or_default();
        let secured = !requirements.is_empty()
            && requirements
                .iter()
                .all(|r| r.as_object().is_some_and(|o| !o.is_empty()));
        let above_viewer = requirements.iter().any(|r| {
            r.as_object().is_some_and(|o| {
                o.values().any(|scopes| {
                    scopes
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| s == "operator" || s == "admin"))
                })
            })
        });
        // Every API operation may read the database: a token created through the API is
        // looked up there.
        let uses_db = path.starts_with("/api/v1/");
        let statuses = [
            (
                "400",
                has_query || has_body,
                "Invalid input; `errors` names each rejected parameter or field",
            ),
            ("401", secured, "A valid bearer token is required"),
            (
                "403",
                secured && above_viewer,
                "The token's role is too low",
            ),
            ("404", has_path, "No such resource"),
            ("413", has_body, "The body is over 1 MiB"),
            ("415", has_body, "The body is not `application/json`"),
            ("503", uses_db, "The database is not reachable"),
        ];
        let responses = op["responses"]
            .as_object_mut()
            .expect("every operation has responses");
        // OpenAPI requires a description on every response; generators refuse the document
        // without one.
        for (status, response) in responses.iter_mut() {
            if response.get("description").is_none() {
                let reason = status
                    .parse::<u16>()
                    .ok()
                    .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("Response");
                response["description"] = json!(reason);
            }
        }
        for (status, applies, description) in statuses {
            if applies && !responses.contains_key(status) {
                responses.insert(status.to_string(), problem(description));
            }
        }
    });
}

fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    })
}

fn for_each_operation(doc: &mut Value, mut f: impl FnMut(&str, &str, &mut Value)) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if matches!(
                method.as_str(),
                "get" | "put" | "post" | "delete" | "patch" | "head" | "options"
            ) {
                f(path, method, op);
            }
        }
    }
}

/// Adds the keys of `rule` to `target`, recursing into objects (`items`).
fn merge(target: &mut Value, rule: Value) {
    let Value::Object(rule) = rule else { return };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target = target.as_object_mut().expect("an object");
    for (k, v) in rule {
        match (target.get_mut(&k), v) {
            (Some(existing @ Value::Object(_)), v @ Value::Object(_)) => merge(existing, v),
            (_, v) => {
                target.insert(k, v);
            }
        }
    }
}
