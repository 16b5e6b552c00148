//! Job bodies as files hold them and as the server shows them, made comparable.
//!
//! A file's entry is a job body, exactly as `POST /api/v1/jobs` takes it. To tell whether the
//! server's job already is what the entry says, both are brought to one form: the entry is
//! parsed as the server parses it and shown as the API shows a job, and both are cut to the
//! fields a body has. Fields the entry leaves out take their defaults, except those the
//! server would not reset from a file's silence: the time zone (the server's default is not
//! known here), a `FIXED_RATE` or `FIXED_DELAY` job's first instant (its creation), the shard count (a `PUT`
//! keeps it) and whether the job is enabled (an operator's pause holds). Those are taken from
//! the job as it is, and sent with the entry, so what is applied is what was compared.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::api::JobView;
use crate::jobs::{JobDefinition, JobRequest, JobSource, JobSpec, Namespace, TimeZoneName};

/// Fields taken from the job as it is when an entry leaves them out (see the module
/// documentation).
const KEPT_WHEN_SILENT: [&str; 4] = ["timezone", "startAt", "shardCount", "enabled"];

/// The fields a job body has, as the OpenAPI document's `JobRequest` lists them.
pub fn body_keys() -> Vec<String> {
    use utoipa::PartialSchema;
    use utoipa::openapi::{RefOr, Schema};
    match JobRequest::schema() {
        RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
        _ => unreachable!("JobRequest is an object schema"),
    }
}

/// The body of a job as the API shows it: its fields a body has, nulls, empty lists and the
/// `default` namespace left out (what `export` writes).
pub fn body_of_view(view: &Value, keys: &[String]) -> Value {
    let mut body = Map::new();
    for key in keys {
        match view.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(Value::String(ns)) if key == "namespace" && ns == Namespace::DEFAULT => {}
            Some(v) => {
                body.insert(key.clone(), v.clone());
            }
        }
    }
    Value::Object(body)
}

/// `entry` completed with the fields the server would not reset from its silence, taken from
/// the job as it is (`current`, the API's view).
pub fn completed(entry: &Value, current: &Value) -> Value {
    let mut body = entry.as_object().cloned().unwrap_or_default();
    let same_type = body.get("scheduleType").unwrap_or(&Value::Null)
        == current.get("scheduleType").unwrap_or(&Value::Null)
        || (body.get("scheduleType").is_none() && current["scheduleType"] == "CRON");
    for key in KEPT_WHEN_SILENT {
        if body.contains_key(key) || current[key].is_null() {
            continue;
        }
        let fixed = ["FIXED_RATE", "FIXED_DELAY"].map(Value::from);
        if key == "startAt" && !(same_type && fixed.contains(&current["scheduleType"])) {
            continue;
        }
        body.insert(key.to_string(), current[key].clone());
    }
    Value::Object(body)
}

/// `entry` as the server would show it, cut to the fields a body has; or why the server
/// would refuse it.
pub fn normalized(entry: &Value, keys: &[String], now: DateTime<Utc>) -> Result<Value, String> {
    let req: JobRequest = serde_json::from_value(entry.clone()).map_err(|e| e.to_string())?;
    let spec = JobSpec::parse(req, None, None, TimeZoneName::UTC, now).map_err(|errors| {
        let fields: Vec<String> = errors.iter().map(ToString::to_string).collect();
        fields.join("; ")
    })?;
    let shown = JobView::from(JobDefinition {
        id: 0,
        spec,
        source: JobSource::Api,
        created_at: now,
        updated_at: now,
        created_by: None,
        updated_by: None,
        enabled_since: now,
        revision: 0,
    });
    let shown = serde_json::to_value(shown).expect("a job view serialises");
    Ok(body_of_view(&shown, keys))
}

/// The fields whose values differ between two bodies, in key order.
pub fn differing(a: &Value, b: &Value, keys: &[String]) -> Vec<String> {
    keys.iter()
        .filter(|k| a.get(k.as_str()) != b.get(k.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_body_has_the_fields_the_api_takes() {
        let keys = body_keys();
        for k in [
            "name",
            "serviceName",
            "handler",
            "cron",
            "shardCount",
            "childJobs",
        ] {
            assert!(keys.iter().any(|x| x == k), "{k} in {keys:?}");
        }
        assert!(!keys.iter().any(|x| x == "createdAt" || x == "source"));
    }

    #[test]
    fn an_entry_and_the_job_it_made_compare_equal() {
        let keys = body_keys();
        let entry = json!({"name": "a", "serviceName": "s", "handler": "h", "cron": "0 0 2 * * ?"});
        // The job as the server shows it after a pause, with its own time zone and shards.
        let made = json!({"name": "a", "serviceName": "s", "handler": "h",
            "cron": "0 0 2 * * ?", "timezone": "Asia/Shanghai", "enabled": false,
            "shardCount": 4});
        let mut server = normalized(&made, &keys, now()).unwrap();
        server["id"] = json!(7);
        server["serviceGroup"] = Value::Null;
        server["createdAt"] = json!("2026-01-01T00:00:00Z");
        server["source"] = json!("API");
        let desired = normalized(&completed(&entry, &server), &keys, now()).unwrap();
        let current = body_of_view(&server, &keys);
        assert_eq!(differing(&desired, &current, &keys), Vec::<String>::new());
        let edited = json!({"name": "a", "serviceName": "s", "handler": "h",
            "cron": "0 0 3 * * ?", "maxRetry": 2});
        let desired = normalized(&completed(&edited, &server), &keys, now()).unwrap();
        assert_eq!(differing(&desired, &current, &keys), ["cron", "maxRetry"]);
    }
}
