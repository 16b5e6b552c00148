//! Jobs as code (docs/jobs-as-code.md): the jobs document in the Nacos config centre
//! (`nacos.jobs_data_id`, `nacos.jobs_group`) is the source of truth for the jobs it names.
//!
//! Every instance with a data id configured, in standalone or nacos mode, follows the
//! document over nacos-sdk's gRPC config client ([`client`]): it reads it at start-up, then
//! again at each push and every [`RESYNC`], which is how a removed document is seen. Each
//! content it has not seen before
//! is parsed and validated as a whole ([`JobDocument::parse`], then the references of every
//! entry); a document with any problem is rejected with an error naming the entries and
//! fields, counted in `nacos_jobs_document_rejected_total`, and nothing changes: the running
//! set stays and readiness is not affected. A valid document goes to
//! [`Store::apply_job_document`], which compares and sets the content hash in the transaction
//! that changes the jobs, so of the instances that see one push exactly one writes; the job
//! revision it bumps makes every engine reload.

mod client;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::clock::Clock;

pub use client::{ConfigKey, NacosConfigClient, NacosError, RESYNC, check_login};

use crate::config::Settings;
use crate::jobs::{
    DocumentError, DocumentFormat, EntryError, FieldError, JobDocument, JobName, JobSource,
    TimeZoneName, links,
};
use crate::store::{DocumentApply, DocumentOutcome, Store, StoreError};

/// What became of one content of the document on this instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    /// This instance applied it: the jobs created, replaced and deleted.
    Applied(crate::store::DocumentChanges),
    /// Applied already (by this or another instance): nothing to do.
    Unchanged,
    /// Invalid: nothing was applied. The message names the entries and fields.
    Rejected(String),
}

/// Follows the jobs document of one data id and group.
pub struct JobDocumentSync {
    clock: Clock,
    client: NacosConfigClient,
    key: ConfigKey,
    format: DocumentFormat,
    store: Arc<dyn Store>,
    job_changes: Arc<Notify>,
    default_tz: TimeZoneName,
    channels: Vec<String>,
    calendars: Vec<String>,
    /// Recorded as created_by / updated_by of the jobs it writes.
    actor: String,
}

impl JobDocumentSync {
    /// `None` when `nacos.jobs_data_id` is empty. With credentials configured this logs in
    /// at once, so wrong ones stop start-up with a message naming the keys to check.
    pub async fn connect(
        settings: &Settings,
        clock: Clock,
        store: Arc<dyn Store>,
        job_changes: Arc<Notify>,
    ) -> Result<Option<Self>, NacosError> {
        let nacos = &settings.nacos;
        if nacos.jobs_data_id.is_empty() {
            return Ok(None);
        }
        match check_login(nacos).await {
            Ok(()) => {}
            Err(e @ NacosError::LoginRefused { .. }) => return Err(e),
            // Nacos being away at start-up is not fatal: the loop keeps trying.
            Err(e) => tracing::warn!(error = %e, "cannot log in to Nacos yet; will retry"),
        }
        let key = ConfigKey::new(&nacos.jobs_data_id, &nacos.jobs_group, &nacos.namespace);
        Ok(Some(Self {
            clock,
            client: NacosConfigClient::new(nacos, key.clone()),
            key,
            format: DocumentFormat::for_data_id(&nacos.jobs_data_id),
            store,
            job_changes,
            default_tz: settings.scheduler.timezone,
            channels: settings
                .alerts
                .channel_names()
                .into_iter()
                .map(String::from)
                .collect(),
            calendars: settings.calendars.iter().map(|c| c.name.clone()).collect(),
            actor: format!("nacos:{}/{}", nacos.jobs_group, nacos.jobs_data_id),
        }))
    }

    /// Validates `content` (`None`: the document does not exist, which means no jobs) and
    /// applies it when valid.
    pub async fn apply_content(&self, content: Option<&str>) -> Result<SyncOutcome, StoreError> {
        let text = content.unwrap_or("");
        let hash = content_hash(text);
        let checked = match JobDocument::parse(text, self.format, self.default_tz, self.clock.now())
        {
            Ok(doc) => match self.reference_errors(&doc).await? {
                errors if errors.is_empty() => Ok(doc),
                errors => Err(DocumentError::Entries(errors)),
            },
            Err(e) => Err(e),
        };
        let doc = match checked {
            Ok(doc) => doc,
            Err(e) => {
                metrics::counter!("nacos_jobs_document_rejected_total").increment(1);
                tracing::error!(
                    data_id = %self.key.data_id,
                    group = %self.key.group,
                    hash = %hash,
                    error = %e,
                    "jobs document rejected as a whole; the jobs applied before stay as they are"
                );
                return Ok(SyncOutcome::Rejected(e.to_string()));
            }
        };
        let outcome = self
            .store
            .apply_job_document(&DocumentApply {
                data_id: &self.key.data_id,
                group: &self.key.group,
                content_hash: &hash,
                document: &doc,
                actor: &self.actor,
                now: self.clock.now(),
            })
            .await?;
        Ok(match outcome {
            DocumentOutcome::Unchanged => {
                tracing::info!(
                    data_id = %self.key.data_id,
                    hash = %hash,
                    "jobs document applied already (by this or another instance)"
                );
                SyncOutcome::Unchanged
            }
            DocumentOutcome::Applied(changes) => {
                metrics::counter!("nacos_jobs_document_applied_total").increment(1);
                tracing::info!(
                    data_id = %self.key.data_id,
                    group = %self.key.group,
                    hash = %hash,
                    jobs = doc.jobs.len(),
                    created = ?changes.created,
                    updated = ?changes.updated,
                    deleted = ?changes.deleted,
                    "jobs document applied"
                );
                if !changes.is_empty() {
                    self.job_changes.notify_one();
                    self.audit_applied(&hash, doc.jobs.len(), &changes).await;
                }
                SyncOutcome::Applied(changes)
            }
        })
    }

    /// Records a document that changed jobs in the audit trail, as `nacos`'s (job keys as
    /// stored: `namespace/name` outside `default`).
    async fn audit_applied(
        &self,
        hash: &str,
        jobs: usize,
        changes: &crate::store::DocumentChanges,
    ) {
        let entry = crate::audit::AuditEntry {
            at: self.clock.now(),
            actor: crate::audit::NACOS_ACTOR.to_string(),
            action: crate::audit::AuditAction::NacosDocumentApplied,
            namespace: None,
            target: self.key.data_id.clone(),
            detail: Some(serde_json::json!({
                "group": self.key.group,
                "contentSha256": hash,
                "jobs": jobs,
                "created": changes.created,
                "updated": changes.updated,
                "deleted": changes.deleted,
            })),
        };
        crate::store::record_audit(self.store.as_ref(), &entry).await;
    }

    /// What the entries refer to outside themselves: alert channels and calendars must be
    /// configured; child jobs must be in the document or be API jobs, without a cycle.
    async fn reference_errors(&self, doc: &JobDocument) -> Result<Vec<EntryError>, StoreError> {
        let named: HashSet<&str> = doc.jobs.iter().map(|j| j.spec.name.as_str()).collect();
        // The jobs as they will be: API jobs the document does not take over, and its own.
        let mut graph: HashMap<String, Vec<JobName>> = self
            .store
            .load_jobs()
            .await?
            .into_iter()
            .filter(|j| j.source == JobSource::Api && !named.contains(j.name().as_str()))
            .map(|j| (j.name().to_string(), j.spec.child_jobs))
            .collect();
        graph.extend(
            doc.jobs
                .iter()
                .map(|j| (j.spec.name.to_string(), j.spec.child_jobs.clone())),
        );
        let channels: Vec<&str> = self.channels.iter().map(String::as_str).collect();
        let calendars: Vec<&str> = self.calendars.iter().map(String::as_str).collect();
        let configured = links::Configured {
            channels: &channels,
            calendars: &calendars,
        };
        let mut problems = Vec::new();
        for (index, job) in doc.jobs.iter().enumerate() {
            let spec = &job.spec;
            let mut errors = Vec::new();
            errors.extend(links::unconfigured(spec, configured));
            let missing: Vec<&str> = spec
                .child_jobs
                .iter()
                .map(|c| c.as_str())
                .filter(|c| !graph.contains_key(*c))
                .collect();
            if !missing.is_empty() {
                errors.push(FieldError::new(
                    "childJobs",
                    format!(
                        "unknown job(s) {}: name jobs of this document or API jobs",
                        missing.join(", ")
                    ),
                ));
            } else if let Some(path) = links::child_cycle(&spec.name, &spec.child_jobs, &graph) {
                errors.push(FieldError::new(
                    "childJobs",
                    format!("would form a cycle: {}", path.join(" -> ")),
                ));
            }
            if !errors.is_empty() {
                problems.push(EntryError {
                    index,
                    name: Some(spec.name.to_string()),
                    errors,
                });
            }
        }
        Ok(problems)
    }

    /// Reads the document and applies it unless its content is `seen` already (applied,
    /// found applied, or rejected: a broken document is reported once, not at every read).
    /// The hash of the content read.
    async fn sync_once(&self, seen: Option<&str>) -> Result<String, SyncError> {
        let content = self.client.get().await?;
        let hash = content_hash(content.as_deref().unwrap_or(""));
        if seen != Some(hash.as_str()) {
            self.apply_content(content.as_deref()).await?;
        }
        Ok(hash)
    }

    /// The first read, before the engine loads the jobs, so an instance starts with the
    /// document's jobs. Failures are logged: the loop retries.
    pub async fn start(&self) -> Option<String> {
        match self.sync_once(None).await {
            Ok(hash) => Some(hash),
            Err(e) => {
                tracing::warn!(error = %e, data_id = %self.key.data_id, "cannot read the jobs document yet; will retry");
                None
            }
        }
    }

    /// Follows the document until `stop`: subscribes to pushes, then reads (and applies what is
    /// new) after each push and every [`RESYNC`]. Errors back off from 1 s to 30 s; nothing is
    /// applied while Nacos is away.
    pub async fn run(self, mut seen: Option<String>, stop: CancellationToken) {
        let backoff = Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30));
        let mut failures = 0;
        loop {
            let step = async {
                self.client.watch().await?;
                self.sync_once(seen.as_deref()).await
            };
            let result: Result<String, SyncError> = tokio::select! {
                _ = stop.cancelled() => return,
                r = step => r,
            };
            let wait = match result {
                Ok(hash) => {
                    seen = Some(hash);
                    failures = 0;
                    RESYNC
                }
                Err(e) => {
                    failures += 1;
                    let delay = backoff.delay(failures);
                    tracing::warn!(error = %e, data_id = %self.key.data_id, retry_in_seconds = delay.as_secs(), "following the jobs document failed");
                    delay
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.client.pushed(), if failures == 0 => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// What a content is known by: the hash [`Store::apply_job_document`] compares and sets.
fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error(transparent)]
    Nacos(#[from] NacosError),
    #[error("applying the jobs document: {0}")]
    Store(#[from] StoreError),
}
