//! The jobs document kept in the Nacos config centre (`nacos.jobs_data_id`): YAML, or JSON
//! when the data id ends in `.json`, with a top-level `jobs:` list whose entries are job bodies
//! exactly as `POST /api/v1/jobs` takes them.
//!
//! The whole document is parsed before anything is applied: every entry goes through the same
//! `JobRequest` → `JobSpec` parse as the API's body, and one bad entry rejects the document,
//! with an error naming each bad entry (index and name) and field.

use std::collections::HashMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{FieldError, JobRequest, JobSpec, TimeZoneName};

/// How the document is written, decided by its data id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentFormat {
    Yaml,
    Json,
}

impl DocumentFormat {
    pub fn for_data_id(data_id: &str) -> Self {
        if data_id.to_ascii_lowercase().ends_with(".json") {
            Self::Json
        } else {
            Self::Yaml
        }
    }
}

/// One job of the document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentJob {
    pub spec: JobSpec,
    /// Hex SHA-256 of the entry as written (keys sorted). An entry whose fingerprint has not
    /// changed since the last applied document is left alone, so an operator's enable or
    /// disable of that job holds until the entry itself changes.
    pub fingerprint: String,
    /// A `FIXED_RATE` or `FIXED_DELAY` entry without `startAt`: its instants start at the job's creation,
    /// which for a job that exists already is its row's, not this document's.
    pub starts_at_creation: bool,
}

/// A parsed, fully valid jobs document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobDocument {
    pub jobs: Vec<DocumentJob>,
}

/// The problems of one entry of `jobs`.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryError {
    pub index: usize,
    /// The entry's `name`, when it has a readable one.
    pub name: Option<String>,
    pub errors: Vec<FieldError>,
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "jobs[{}]", self.index)?;
        if let Some(n) = &self.name {
            write!(f, " (`{n}`)")?;
        }
        let fields: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        write!(f, ": {}", fields.join("; "))
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DocumentError {
    #[error("the document is not valid {format}: {message}")]
    Syntax {
        format: &'static str,
        message: String,
    },
    #[error("{0}")]
    Shape(String),
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(" | "))]
    Entries(Vec<EntryError>),
}

impl JobDocument {
    /// Parses `text`. Jobs without a `timezone` take `default_tz`; every cron must fire after
    /// `now`, as through the API.
    pub fn parse(
        text: &str,
        format: DocumentFormat,
        default_tz: TimeZoneName,
        now: DateTime<Utc>,
    ) -> Result<Self, DocumentError> {
        let entries = document_entries(text, format)?;
        let mut jobs = Vec::with_capacity(entries.len());
        let mut problems = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (index, entry) in entries.into_iter().enumerate() {
            let name = entry
                .get("name")
                .and_then(Value::as_str)
                .map(|n| n.chars().take(100).collect::<String>());
            let fingerprint = hex::encode(Sha256::digest(entry.to_string()));
            let mut starts_at_creation = false;
            let parsed = request(entry).and_then(|req| {
                starts_at_creation = req.starts_at_creation();
                JobSpec::parse(req, None, None, default_tz, now)
            });
            match parsed {
                Ok(spec) => {
                    if let Some(first) = seen.insert(spec.name.to_string(), index) {
                        problems.push(EntryError {
                            index,
                            name,
                            errors: vec![FieldError::new(
                                "name",
                                format!("the same name as jobs[{first}]"),
                            )],
                        });
                    } else {
                        jobs.push(DocumentJob {
                            spec,
                            fingerprint,
                            starts_at_creation,
                        });
                    }
                }
                Err(errors) => problems.push(EntryError {
                    index,
                    name,
                    errors,
                }),
            }
        }
        if problems.is_empty() {
            Ok(Self { jobs })
        } else {
            Err(DocumentError::Entries(problems))
        }
    }
}

/// The entries of the document's top-level `jobs` list (none for an empty document).
/// The entries of the document's `jobs` list as written, each a job body.
pub fn document_entries(text: &str, format: DocumentFormat) -> Result<Vec<Value>, DocumentError> {
    let root: Value = match format {
        DocumentFormat::Json => serde_json::from_str(text).map_err(|e| DocumentError::Syntax {
            format: "JSON",
            message: e.to_string(),
        })?,
        DocumentFormat::Yaml => yaml_serde::from_str(text).map_err(|e| DocumentError::Syntax {
            format: "YAML",
            message: e.to_string(),
        })?,
    };
    let mut top = match root {
        Value::Object(top) => top,
        Value::Null => return Ok(Vec::new()),
        _ => {
            return Err(DocumentError::Shape(
                "the document must be a mapping with a top-level `jobs` list".into(),
            ));
        }
    };
    if let Some(other) = top.keys().find(|k| *k != "jobs") {
        return Err(DocumentError::Shape(format!(
            "unknown top-level key `{other}`: the document has only `jobs`"
        )));
    }
    match top.remove("jobs") {
        Some(Value::Array(list)) => Ok(list),
        Some(Value::Null) => Ok(Vec::new()),
        Some(_) => Err(DocumentError::Shape("`jobs` must be a list".into())),
        None => Err(DocumentError::Shape(
            "the document needs a top-level `jobs` list".into(),
        )),
    }
}

/// An entry as a job body, with the field named when its shape is wrong (as the API does).
fn request(entry: Value) -> Result<JobRequest, Vec<FieldError>> {
    serde_path_to_error::deserialize::<_, JobRequest>(entry).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.into_inner().to_string();
        let field = if path != "." {
            path
        } else if msg.starts_with("missing field") || msg.starts_with("unknown field") {
            msg.split('`').nth(1).unwrap_or("entry").to_string()
        } else {
            "entry".to_string()
        };
        vec![FieldError::new(field, msg)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, format: DocumentFormat) -> Result<JobDocument, DocumentError> {
        JobDocument::parse(
            text,
            format,
            TimeZoneName::parse("UTC").unwrap(),
            Utc::now(),
        )
    }

    const YAML: &str = r#"
jobs:
  - name: order-sync
    serviceName: order-service
    handler: syncOrders
    cron: "0 0/5 * * * ?"
    shardCount: 4
    jobParams: {batch: 500}
  - name: report
    serviceName: report-service
    handler: daily
    cron: "0 0 2 * * ?"
    timezone: Asia/Shanghai
    enabled: false
"#;

    #[test]
    fn yaml_entries_are_job_bodies() {
        let doc = parse(YAML, DocumentFormat::Yaml).unwrap();
        assert_eq!(doc.jobs.len(), 2);
        let a = &doc.jobs[0].spec;
        assert_eq!(a.name.as_str(), "order-sync");
        assert_eq!(a.shard_count, 4);
        assert_eq!(a.job_params, Some(serde_json::json!({"batch": 500})));
        assert_eq!((a.timeout_seconds, a.max_retry, a.enabled), (300, 3, true));
        let b = &doc.jobs[1].spec;
        assert_eq!(b.timezone.name(), "Asia/Shanghai");
        assert!(!b.enabled);
        assert_ne!(doc.jobs[0].fingerprint, doc.jobs[1].fingerprint);
    }

    #[test]
    fn json_for_a_json_data_id() {
        assert_eq!(
            DocumentFormat::for_data_id("jobs.JSON"),
            DocumentFormat::Json
        );
        assert_eq!(
            DocumentFormat::for_data_id("jobflow-jobs"),
            DocumentFormat::Yaml
        );
        let doc = parse(
            r#"{"jobs": [{"name": "a", "serviceName": "s", "handler": "h", "cron": "0 * * * * ?"}]}"#,
            DocumentFormat::Json,
        )
        .unwrap();
        assert_eq!(doc.jobs[0].spec.name.as_str(), "a");
    }

    #[test]
    fn fingerprints_ignore_key_order_and_layout() {
        let a = parse(
            "jobs:\n- {name: a, serviceName: s, handler: h, cron: '0 * * * * ?'}\n",
            DocumentFormat::Yaml,
        )
        .unwrap();
        let b = parse(
            "jobs:\n  - cron: '0 * * * * ?'\n    handler: h\n    name: a\n    serviceName: s\n",
            DocumentFormat::Yaml,
        )
        .unwrap();
        assert_eq!(a.jobs[0].fingerprint, b.jobs[0].fingerprint);
    }

    #[test]
    fn empty_documents_have_no_jobs() {
        assert!(parse("", DocumentFormat::Yaml).unwrap().jobs.is_empty());
        assert!(
            parse("jobs: []", DocumentFormat::Yaml)
                .unwrap()
                .jobs
                .is_empty()
        );
        assert!(
            parse("jobs:", DocumentFormat::Yaml)
                .unwrap()
                .jobs
                .is_empty()
        );
    }

    #[test]
    fn errors_name_every_bad_entry_and_field() {
        let text = r#"
jobs:
  - {name: good, serviceName: s, handler: h, cron: "0 * * * * ?"}
  - {name: bad-cron, serviceName: s, handler: h, cron: "every minute"}
  - {name: typo, serviceName: s, handler: h, cron: "0 * * * * ?", shardCont: 2}
  - {name: good, serviceName: s, handler: h2, cron: "0 * * * * ?"}
  - {serviceName: s, handler: "a/b", cron: "0 * * * * ?", shardCount: "four"}
"#;
        let Err(DocumentError::Entries(e)) = parse(text, DocumentFormat::Yaml) else {
            panic!("expected entry errors");
        };
        let summary: Vec<(usize, Option<&str>, Vec<&str>)> = e
            .iter()
            .map(|e| {
                (
                    e.index,
                    e.name.as_deref(),
                    e.errors.iter().map(|f| f.field.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (1, Some("bad-cron"), vec!["cron"]),
                (2, Some("typo"), vec!["shardCont"]),
                (3, Some("good"), vec!["name"]),
                (4, None, vec!["shardCount"]),
            ]
        );
        let text = DocumentError::Entries(e).to_string();
        assert!(text.starts_with("jobs[1] (`bad-cron`): cron: "), "{text}");
        assert!(
            text.contains("jobs[3] (`good`): name: the same name as jobs[0]"),
            "{text}"
        );
    }

    #[test]
    fn the_shape_is_checked() {
        for (text, want) in [
            ("jobs: {a: 1}", "`jobs` must be a list"),
            ("job: []", "unknown top-level key `job`"),
            ("- a\n- b", "must be a mapping"),
            ("{}", "needs a top-level `jobs` list"),
        ] {
            let e = parse(text, DocumentFormat::Yaml).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let e = parse("jobs: [", DocumentFormat::Yaml).unwrap_err();
        assert!(
            matches!(e, DocumentError::Syntax { format: "YAML", .. }),
            "{e}"
        );
        let e = parse("{\"jobs\": ", DocumentFormat::Json).unwrap_err();
        assert!(
            matches!(e, DocumentError::Syntax { format: "JSON", .. }),
            "{e}"
        );
    }
}
