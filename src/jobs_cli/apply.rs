//! `jobflow jobs apply`: makes the server's jobs what files say, declaratively.
//!
//! The files are jobs documents, the format of the Nacos jobs document (docs/jobs-as-code.md):
//! a top-level `jobs` list of job bodies. Every file is read and validated before anything is
//! asked of the server; a bad file changes nothing. The plan compares each entry with the job
//! of its name (see [`body`](super::body)): absent → created, different → replaced (`PUT`,
//! naming the fields that change), the same → left alone, so applying the same files twice
//! writes nothing the second time. With `--prune`, jobs the files do not name are deleted,
//! except those the Nacos document defines, which only the document changes. Creations go
//! first, a job after the child jobs it names, then replacements, then deletions.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use chrono::Utc;
use reqwest::Method;
use serde_json::{Value, json};

use super::Failure;
use super::api::Api;
use super::body::{body_keys, body_of_view, completed, differing, normalized};
use crate::jobs::{DocumentFormat, JobDocument, TimeZoneName, document_entries};

/// One entry of a file.
pub struct Entry {
    pub name: String,
    pub body: Value,
}

/// What applying does to one job.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create,
    /// Replaced; the fields that change.
    Update(Vec<String>),
    Delete,
    Unchanged,
    /// Not changed through the API (a job of the Nacos document).
    Refused(String),
}

impl Action {
    fn word(&self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update(_) => "update",
            Self::Delete => "delete",
            Self::Unchanged => "unchanged",
            Self::Refused(_) => "refused",
        }
    }
}

pub struct Step {
    pub name: String,
    pub action: Action,
    /// What is sent: the body to create or replace with.
    pub body: Option<Value>,
    /// Why the server refused it, once applied.
    pub error: Option<String>,
}

/// Reads the jobs documents at `paths`: files, or directories whose `.yaml`, `.yml` and
/// `.json` files are read in name order. A file that does not parse, an entry the server
/// would refuse on its face, or a name given twice is a usage error.
pub fn read_entries(paths: &[PathBuf], namespace: &str) -> Result<Vec<Entry>, Failure> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && p.extension()
                            .and_then(|x| x.to_str())
                            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
                })
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(path.clone());
        }
    }
    let mut entries = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for file in files {
        for mut entry in read_file(&file)? {
            // An entry is of the namespace the command acts in: it says so, or says nothing.
            match entry.body.get("namespace").and_then(Value::as_str) {
                Some(ns) if ns != namespace => {
                    return Err(Failure::Usage(format!(
                        "{}: job `{}` is in namespace `{ns}`; apply it with --namespace {ns}",
                        file.display(),
                        entry.name
                    )));
                }
                _ => entry.body["namespace"] = Value::from(namespace),
            }
            if let Some(first) = seen.insert(entry.name.clone(), file.clone()) {
                return Err(Failure::Usage(format!(
                    "{}: job `{}` is also in {}",
                    file.display(),
                    entry.name,
                    first.display()
                )));
            }
            entries.push(entry);
        }
    }
    Ok(entries)
}

fn read_file(file: &Path) -> Result<Vec<Entry>, Failure> {
    let bad = |e: &dyn std::fmt::Display| Failure::Usage(format!("{}: {e}", file.display()));
    let text = std::fs::read_to_string(file).map_err(|e| bad(&e))?;
    let format = DocumentFormat::for_data_id(&file.to_string_lossy());
    JobDocument::parse(&text, format, TimeZoneName::UTC, Utc::now()).map_err(|e| bad(&e))?;
    let entries = document_entries(&text, format).map_err(|e| bad(&e))?;
    Ok(entries
        .into_iter()
        .map(|body| Entry {
            name: body["name"].as_str().unwrap_or_default().to_string(),
            body,
        })
        .collect())
}

/// The plan: what applying `entries` does to the server's `jobs` (the API's views).
pub fn plan(entries: Vec<Entry>, jobs: &[Value], prune: bool) -> Result<Vec<Step>, Failure> {
    let keys = body_keys();
    let now = Utc::now();
    let current: BTreeMap<&str, &Value> = jobs
        .iter()
        .filter_map(|j| Some((j["name"].as_str()?, j)))
        .collect();
    let named: HashSet<String> = entries.iter().map(|e| e.name.clone()).collect();
    let step = |name: &str, action, body| Step {
        name: name.to_string(),
        action,
        body,
        error: None,
    };
    let mut creates = Vec::new();
    let mut steps = Vec::new();
    for entry in entries {
        let Some(view) = current.get(entry.name.as_str()) else {
            creates.push(step(&entry.name, Action::Create, Some(entry.body)));
            continue;
        };
        if view["source"] == "NACOS" {
            let why = "defined by the Nacos jobs document; change it there".to_string();
            steps.push(step(&entry.name, Action::Refused(why), None));
            continue;
        }
        let body = completed(&entry.body, view);
        let desired = normalized(&body, &keys, now)
            .map_err(|e| Failure::Usage(format!("job `{}`: {e}", entry.name)))?;
        let changed = differing(&desired, &body_of_view(view, &keys), &keys);
        if changed.is_empty() {
            steps.push(step(&entry.name, Action::Unchanged, None));
        } else {
            steps.push(step(&entry.name, Action::Update(changed), Some(body)));
        }
    }
    let mut all = children_first(creates);
    all.append(&mut steps);
    if prune {
        for (name, view) in &current {
            if !named.contains(*name) && view["source"] != "NACOS" {
                all.push(step(name, Action::Delete, None));
            }
        }
    }
    Ok(all)
}

/// Creations ordered so that a job comes after the jobs it names as children (the server
/// refuses a child that does not exist yet); otherwise in the files' order.
fn children_first(creates: Vec<Step>) -> Vec<Step> {
    let index: HashMap<String, usize> = creates
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i))
        .collect();
    let mut order = Vec::with_capacity(creates.len());
    let mut placed = vec![false; creates.len()];
    fn visit(
        i: usize,
        creates: &[Step],
        index: &HashMap<String, usize>,
        placed: &mut [bool],
        order: &mut Vec<usize>,
    ) {
        if placed[i] {
            return;
        }
        placed[i] = true;
        let children = creates[i]
            .body
            .as_ref()
            .and_then(|b| b["childJobs"].as_array().cloned())
            .unwrap_or_default();
        for child in children.iter().filter_map(Value::as_str) {
            if let Some(&c) = index.get(child) {
                visit(c, creates, index, placed, order);
            }
        }
        order.push(i);
    }
    for i in 0..creates.len() {
        visit(i, &creates, &index, &mut placed, &mut order);
    }
    let mut slots: Vec<Option<Step>> = creates.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Carries out the plan's changes in order; each refusal is noted on its step.
pub async fn execute(api: &Api, steps: &mut [Step]) {
    for step in steps.iter_mut() {
        let path = Api::job_path(&step.name);
        let result = match &step.action {
            Action::Create => {
                api.send(Method::POST, "/api/v1/jobs", step.body.as_ref())
                    .await
            }
            Action::Update(_) => api.send(Method::PUT, &path, step.body.as_ref()).await,
            Action::Delete => api.send(Method::DELETE, &path, None).await,
            Action::Unchanged | Action::Refused(_) => continue,
        };
        if let Err(e) = result {
            step.error = Some(e.to_string());
        }
    }
}

/// Whether every step went through (nothing refused).
pub fn succeeded(steps: &[Step]) -> bool {
    steps
        .iter()
        .all(|s| s.error.is_none() && !matches!(s.action, Action::Refused(_)))
}

/// The plan (and outcome) for people: one line per change, then the count left alone.
pub fn describe(steps: &[Step], applied: bool) -> String {
    let mut out = String::new();
    let unchanged = steps
        .iter()
        .filter(|s| s.action == Action::Unchanged)
        .count();
    for s in steps.iter().filter(|s| s.action != Action::Unchanged) {
        let detail = match &s.action {
            Action::Update(fields) => format!(" ({})", fields.join(", ")),
            Action::Refused(why) => format!(": {why}"),
            _ => String::new(),
        };
        let failed = match &s.error {
            Some(e) => format!("\n    failed: {e}"),
            None => String::new(),
        };
        out.push_str(&format!(
            "{:<9} {}{detail}{failed}\n",
            s.action.word(),
            s.name
        ));
    }
    out.push_str(&format!("unchanged {unchanged} job(s)\n"));
    if !applied {
        out.push_str("dry run: nothing was changed\n");
    }
    out
}

/// The plan (and outcome) for scripts.
pub fn as_json(steps: &[Step], applied: bool) -> Value {
    let changes: Vec<Value> = steps
        .iter()
        .filter(|s| s.action != Action::Unchanged)
        .map(|s| {
            let fields = match &s.action {
                Action::Update(f) => json!(f),
                _ => Value::Null,
            };
            let error = match &s.action {
                Action::Refused(why) => Some(why.clone()),
                _ => s.error.clone(),
            };
            json!({"action": s.action.word(), "name": s.name, "fields": fields, "error": error})
        })
        .collect();
    let unchanged: Vec<&str> = steps
        .iter()
        .filter(|s| s.action == Action::Unchanged)
        .map(|s| s.name.as_str())
        .collect();
    json!({"dryRun": !applied, "changes": changes, "unchanged": unchanged})
}
