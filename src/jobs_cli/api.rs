//! The server's REST API as the jobs command uses it: one client, a token, and every refusal
//! turned into a message that names the request and the server's own explanation.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::Failure;
use crate::dispatch::client::error_chain;
use crate::jobs::percent_encoded;

/// Jobs are listed this many at a time.
const PAGE: u32 = 200;

pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// Every request the command makes is in this namespace (`?namespace=`).
    namespace: String,
}

impl Api {
    pub fn new(base: &str, token: Option<String>, namespace: &str) -> Result<Self, Failure> {
        let namespace = crate::jobs::Namespace::parse(namespace)
            .map_err(|m| Failure::Usage(format!("--namespace {m}")))?
            .to_string();
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "--url must start with http:// or https://, not `{base}`"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| Failure::Refused(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self {
            http,
            base,
            token,
            namespace,
        })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The path of job `name`.
    pub fn job_path(name: &str) -> String {
        format!("/api/v1/jobs/{}", percent_encoded(name))
    }

    /// Sends a request; a 2xx answer's body (`null` when empty), or a refusal.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let (status, answer) = self.exchange(method.clone(), path, body).await?;
        if status.is_success() {
            return Ok(answer);
        }
        Err(Failure::Refused(refusal(&method, path, status, &answer)))
    }

    /// Sends a request and returns the status with the body, whatever the status.
    pub async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), Failure> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = format!("{}{path}{separator}namespace={}", self.base, self.namespace);
        let mut req = self.http.request(method.clone(), url);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let response = req
            .send()
            .await
            .map_err(|e| Failure::Refused(format!("{method} {path}: {}", error_chain(&e))))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| Failure::Refused(format!("{method} {path}: {e}")))?;
        let answer = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, answer))
    }

    pub async fn get(&self, path: &str) -> Result<Value, Failure> {
        self.send(Method::GET, path, None).await
    }

    /// Every job, page by page, in name order.
    pub async fn all_jobs(&self) -> Result<Vec<Value>, Failure> {
        let mut jobs = Vec::new();
        for page in 0.. {
            let answer = self
                .get(&format!("/api/v1/jobs?page={page}&size={PAGE}"))
                .await?;
            let content = answer["content"].as_array().cloned().unwrap_or_default();
            let last = content.len() < PAGE as usize
                || answer["totalPages"].as_i64().is_some_and(|n| page + 1 >= n);
            jobs.extend(content);
            if last {
                break;
            }
        }
        Ok(jobs)
    }
}

/// `PUT /api/v1/jobs/x: 409 Conflict: the job is defined by …` from a problem answer.
fn refusal(method: &Method, path: &str, status: StatusCode, answer: &Value) -> String {
    let detail = answer["detail"]
        .as_str()
        .or(answer["title"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| match answer {
            Value::Null => String::new(),
            other => other.to_string(),
        });
    let mut text = format!("{method} {path}: {status}");
    if !detail.is_empty() {
        text.push_str(": ");
        text.push_str(&detail);
    }
    if let Some(errors) = answer["errors"].as_array() {
        for e in errors {
            let field = e["field"].as_str().unwrap_or("?");
            let message = e["message"].as_str().unwrap_or("");
            text.push_str(&format!("\n  {field}: {message}"));
        }
    }
    text
}
