//! The SQL shared by both backends. Every statement is portable between MySQL 8, MariaDB
//! 10.11 and SQLite 3 (`?` placeholders, no vendor functions: times are bound from Rust), and
//! every value is bound, never formatted into the text.
//!
//! SQLite note: each write transaction starts with its write, so SQLite takes the write lock
//! at once and waits on `busy_timeout` instead of failing a read-to-write upgrade.

macro_rules! job_columns {
    () => {
        "id, name, service_name, handler, cron, timezone, enabled, shard_count, shard_strategy, \
         shard_params, job_params, timeout_seconds, max_retry, misfire_policy, description, \
         created_at, updated_at, created_by, updated_by, route_strategy, overlap_policy, child_jobs, \
         alert_channels, source, enabled_since"
    };
}

macro_rules! execution_columns {
    () => {
        "id, execution_id, trace_id, job_name, trigger_type, fire_time, scheduler_instance, \
         executor_instance, shard_start, shard_end, shard_count, trigger_time, due_time, start_time, \
         finish_time, duration_ms, status, retry_count, parent_trace_id, result_message, error_message, \
         job_params"
    };
}

/// Implements `Store` for `$store` (which has a `pool: sqlx::Pool<$db>` field, a
/// `creates: batch::CreateQueue` field and a `run_migrations` method) with the portable SQL.
/// What differs between the backends: `$lock_rows` ends a SELECT that must lock the rows it
/// reads until the commit (SQLite has one writer and no such clause).
macro_rules! sql_store {
    ($store:ty, $db:ty, $backend:literal, $lock_rows:literal) => {
        impl $store {
            async fn fetch_job<'c, E>(exec: E, name: &str) -> Result<Option<$crate::jobs::JobDefinition>, $crate::store::StoreError>
            where
                E: sqlx::Executor<'c, Database = $db>,
            {
                sqlx::query_as::<_, $crate::store::rows::JobRow>(concat!("SELECT ", job_columns!(), " FROM job_definition WHERE name = ?"))
                    .bind(name)
                    .fetch_optional(exec)
                    .await?
                    .map($crate::jobs::JobDefinition::try_from)
                    .transpose()
            }

            /// Takes the next job revision for this transaction's job writes, which stamp it on
            /// the rows they write (the change log, see `Store::job_changes_since`). The
            /// counter's row lock, held until the commit, orders the writers: once revision R
            /// is visible, so is every write up to R.
            async fn next_revision(tx: &mut sqlx::Transaction<'_, $db>) -> Result<i64, $crate::store::StoreError> {
                sqlx::query("UPDATE job_revision SET revision = revision + 1 WHERE id = 1").execute(&mut **tx).await?;
                Ok(sqlx::query_scalar("SELECT revision FROM job_revision WHERE id = 1").fetch_one(&mut **tx).await?)
            }

            /// Writes a batch of creations in one transaction and answers each (see `batch`).
            async fn write_creates(pool: sqlx::Pool<$db>, mut batch: Vec<$crate::store::batch::NewJob>) {
                match Self::insert_batch(&pool, &batch).await {
                    Ok(answers) => {
                        for (job, answer) in batch.drain(..).zip(answers) {
                            let _ = job.done.send(answer);
                        }
                    }
                    Err(e) => $crate::store::batch::fail_all(batch, e),
                }
            }

            async fn insert_batch(
                pool: &sqlx::Pool<$db>,
                batch: &[$crate::store::batch::NewJob],
            ) -> Result<Vec<Result<$crate::jobs::JobDefinition, $crate::store::StoreError>>, $crate::store::StoreError> {
                let mut tx = pool.begin().await?;
                let revision = Self::next_revision(&mut tx).await?;
                let mut refused = std::collections::HashMap::new();
                for (i, job) in batch.iter().enumerate() {
                    // A duplicate fails its own statement only; the transaction goes on.
                    match Self::insert_job(&mut tx, &job.spec, job.actor.as_deref(), job.now, revision).await {
                        Ok(()) => {}
                        Err($crate::store::StoreError::Duplicate(key)) => {
                            refused.insert(i, key);
                        }
                        Err(e) => return Err(e),
                    }
                }
                let mut read = sqlx::QueryBuilder::<$db>::new(concat!("SELECT ", job_columns!(), " FROM job_definition WHERE revision = "));
                read.push_bind(revision).push(" AND name IN (");
                let mut names = read.separated(", ");
                for (_, job) in batch.iter().enumerate().filter(|(i, _)| !refused.contains_key(i)) {
                    names.push_bind(job.spec.name.as_str().to_string());
                }
                read.push(")");
                let mut stored: std::collections::HashMap<String, $crate::store::rows::JobRow> = if refused.len() < batch.len() {
                    read.build_query_as::<$crate::store::rows::JobRow>()
                        .fetch_all(&mut *tx)
                        .await?
                        .into_iter()
                        .map(|r| (r.name.clone(), r))
                        .collect()
                } else {
                    Default::default()
                };
                if refused.len() == batch.len() {
                    // Nothing written: the revision taken stays unused.
                    tx.rollback().await?;
                } else {
                    tx.commit().await?;
                }
                Ok(batch
                    .iter()
                    .enumerate()
                    .map(|(i, job)| match refused.get(&i) {
                        Some(key) => Err($crate::store::StoreError::Duplicate(*key)),
                        None => stored
                            .remove(job.spec.name.as_str())
                            .ok_or_else(|| $crate::store::StoreError::Corrupt("inserted job not found".into()))
                            .and_then($crate::jobs::JobDefinition::try_from),
                    })
                    .collect())
            }

            /// Leaves the tombstone of a deleted job for the engines' incremental reloads.
            async fn tombstone(
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
                revision: i64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query("INSERT INTO job_tombstone (revision, name, deleted_at) VALUES (?, ?, ?)")
                    .bind(revision)
                    .bind(name)
                    .bind($crate::store::ms(now))
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// Deletes the tombstones older than [`TOMBSTONE_KEEP_SECONDS`] and raises
            /// `pruned_revision` past them: an engine behind it cannot learn of those deletions
            /// from the log any more, and reloads every job instead. Runs in the transactions
            /// that write tombstones (which hold the counter's lock already).
            ///
            /// [`TOMBSTONE_KEEP_SECONDS`]: $crate::store::TOMBSTONE_KEEP_SECONDS
            async fn prune_tombstones(
                tx: &mut sqlx::Transaction<'_, $db>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), $crate::store::StoreError> {
                let before = $crate::store::ms(now - chrono::Duration::seconds($crate::store::TOMBSTONE_KEEP_SECONDS));
                let pruned: Option<i64> = sqlx::query_scalar("SELECT MAX(revision) FROM job_tombstone WHERE deleted_at < ?")
                    .bind(before)
                    .fetch_one(&mut **tx)
                    .await?;
                if let Some(pruned) = pruned {
                    sqlx::query("DELETE FROM job_tombstone WHERE revision <= ?").bind(pruned).execute(&mut **tx).await?;
                    sqlx::query("UPDATE job_revision SET pruned_revision = ? WHERE id = 1 AND pruned_revision < ?")
                        .bind(pruned)
                        .bind(pruned)
                        .execute(&mut **tx)
                        .await?;
                }
                Ok(())
            }

            /// Parsed job rows, and the names of those that no longer parse (reported here,
            /// never scheduled: one unreadable row must not stop the other jobs).
            fn readable_jobs(rows: Vec<$crate::store::rows::JobRow>) -> (Vec<$crate::jobs::JobDefinition>, Vec<String>) {
                let mut unreadable = Vec::new();
                let jobs = rows
                    .into_iter()
                    .filter_map(|r| {
                        let name = r.name.clone();
                        match $crate::jobs::JobDefinition::try_from(r) {
                            Ok(j) => Some(j),
                            Err(e) => {
                                tracing::error!(error = %e, "skipping unreadable job definition");
                                unreadable.push(name);
                                None
                            }
                        }
                    })
                    .collect();
                (jobs, unreadable)
            }

            /// Binds a spec's columns from `service_name` to `description`, in table order, then
            /// `route_strategy`, `overlap_policy`, `child_jobs`, `alert_channels`.
            fn bind_spec<'q>(
                q: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
                spec: &$crate::jobs::JobSpec,
            ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments> {
                q.bind(spec.service_name.as_str().to_string())
                    .bind(spec.handler.as_str().to_string())
                    .bind(spec.cron.as_str().to_string())
                    .bind(spec.timezone.name())
                    .bind(spec.enabled)
                    .bind(spec.shard_count as i32)
                    .bind(spec.shard_strategy.as_str())
                    .bind(spec.shard_params.to_json().map(|v| v.to_string()))
                    .bind(spec.job_params.as_ref().map(|v| v.to_string()))
                    .bind(spec.timeout_seconds as i32)
                    .bind(spec.max_retry as i32)
                    .bind(spec.misfire_policy.as_str())
                    .bind(spec.description.clone())
                    .bind(spec.route_strategy.as_str())
                    .bind(spec.overlap_policy.as_str())
                    .bind($crate::store::rows::name_list(&spec.child_jobs))
                    .bind($crate::store::rows::name_list(&spec.alert_channels))
            }

            async fn insert_job(
                tx: &mut sqlx::Transaction<'_, $db>,
                spec: &$crate::jobs::JobSpec,
                actor: Option<&str>,
                now: chrono::DateTime<chrono::Utc>,
                revision: i64,
            ) -> Result<(), $crate::store::StoreError> {
                let now = $crate::store::ms(now);
                let insert = sqlx::query(
                    "INSERT INTO job_definition (name, service_name, handler, cron, timezone, enabled, shard_count, \
                     shard_strategy, shard_params, job_params, timeout_seconds, max_retry, misfire_policy, description, \
                     route_strategy, overlap_policy, child_jobs, alert_channels, created_at, updated_at, created_by, updated_by, \
                     enabled_since, revision) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(spec.name.as_str());
                Self::bind_spec(insert, spec)
                .bind(now)
                .bind(now)
                .bind(actor)
                .bind(actor)
                .bind(now)
                .bind(revision)
                .execute(&mut **tx)
                .await
                .map_err($crate::store::StoreError::from_write)?;
                Ok(())
            }

            /// Replaces every field of the job named `spec.name` (stamping `revision`); the rows
            /// MySQL counts as changed.
            async fn replace_job(
                tx: &mut sqlx::Transaction<'_, $db>,
                spec: &$crate::jobs::JobSpec,
                actor: Option<&str>,
                now: chrono::DateTime<chrono::Utc>,
                revision: i64,
            ) -> Result<u64, $crate::store::StoreError> {
                // `enabled_since` first: MySQL evaluates SET left to right, SQLite reads old values.
                let update = sqlx::query(
                    "UPDATE job_definition SET enabled_since = CASE WHEN enabled THEN enabled_since ELSE ? END, \
                     service_name = ?, handler = ?, cron = ?, timezone = ?, enabled = ?, \
                     shard_count = ?, shard_strategy = ?, shard_params = ?, job_params = ?, timeout_seconds = ?, \
                     max_retry = ?, misfire_policy = ?, description = ?, route_strategy = ?, overlap_policy = ?, \
                     child_jobs = ?, alert_channels = ?, updated_at = ?, updated_by = ?, revision = ? WHERE name = ?",
                )
                .bind($crate::store::ms(now));
                Ok(Self::bind_spec(update, spec)
                .bind($crate::store::ms(now))
                .bind(actor)
                .bind(revision)
                .bind(spec.name.as_str())
                .execute(&mut **tx)
                .await?
                .rows_affected())
            }

            fn push_job_filter(qb: &mut sqlx::QueryBuilder<$db>, f: &$crate::store::JobFilter) {
                if let Some(s) = &f.service_name {
                    qb.push(" AND service_name = ").push_bind(s.clone());
                }
                if let Some(e) = f.enabled {
                    qb.push(" AND enabled = ").push_bind(e);
                }
                if let Some(p) = &f.name_prefix {
                    // `!` escapes LIKE wildcards the same way on every backend.
                    let escaped = p.replace('!', "!!").replace('%', "!%").replace('_', "!_");
                    qb.push(" AND name LIKE ").push_bind(format!("{escaped}%")).push(" ESCAPE '!'");
                }
            }

            /// The PENDING and RUNNING executions of `job`, oldest first.
            async fn open_in<'c, E>(exec: E, job: &str) -> Result<Vec<$crate::jobs::Execution>, $crate::store::StoreError>
            where
                E: sqlx::Executor<'c, Database = $db>,
            {
                // Along the status index: the open rows of all jobs are few, a job's history
                // may be millions. The unary `+` keeps SQLite's planner off the job_name index,
                // which it prefers without statistics; MySQL ignores it and picks by cost.
                let rows = sqlx::query_as::<_, $crate::store::rows::ExecutionRow>(concat!(
                    "SELECT ", execution_columns!(), " FROM job_execution WHERE status IN ('PENDING', 'RUNNING') AND +job_name = ? ORDER BY id"
                ))
                .bind(job)
                .fetch_all(exec)
                .await?;
                rows.into_iter().map(Self::execution).collect()
            }

            /// Inserts rows with multi-row statements and reads their generated ids back by
            /// trace id (ids of a multi-row insert are not reported one by one).
            async fn insert_executions(
                tx: &mut sqlx::Transaction<'_, $db>,
                rows: &[&$crate::jobs::NewExecution],
            ) -> Result<Vec<$crate::jobs::Execution>, $crate::store::StoreError> {
                let mut ids = std::collections::HashMap::with_capacity(rows.len());
                for chunk in rows.chunks($crate::store::MULTI_ROW) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO job_execution (execution_id, trace_id, job_name, trigger_type, fire_time, \
                         scheduler_instance, executor_instance, shard_start, shard_end, shard_count, trigger_time, due_time, status, \
                         retry_count, parent_trace_id, error_message, job_params) ",
                    );
                    qb.push_values(chunk, |mut b, r| {
                        b.push_bind(r.execution_id.clone())
                            .push_bind(r.trace_id.clone())
                            .push_bind(r.job_name.clone())
                            .push_bind(r.trigger_type.as_str())
                            .push_bind($crate::store::ms(r.fire_time))
                            .push_bind(r.scheduler_instance.clone())
                            .push_bind(r.executor_instance.clone())
                            .push_bind(r.shard_start as i32)
                            .push_bind(r.shard_end as i32)
                            .push_bind(r.shard_count as i32)
                            .push_bind($crate::store::ms(r.trigger_time))
                            .push_bind($crate::store::ms(r.due_time))
                            .push_bind(r.status.as_str())
                            .push_bind(r.retry_count as i32)
                            .push_bind(r.parent_trace_id.clone())
                            .push_bind(r.error_message.clone())
                            .push_bind(r.job_params.as_ref().map(|v| v.to_string()));
                    });
                    qb.build().execute(&mut **tx).await.map_err($crate::store::StoreError::from_write)?;
                    let mut select = sqlx::QueryBuilder::<$db>::new("SELECT id, trace_id FROM job_execution WHERE trace_id IN (");
                    let mut list = select.separated(", ");
                    for r in chunk {
                        list.push_bind(r.trace_id.clone());
                    }
                    select.push(")");
                    let found: Vec<(i64, String)> = select.build_query_as().fetch_all(&mut **tx).await?;
                    ids.extend(found.into_iter().map(|(id, trace)| (trace, id)));
                }
                rows.iter()
                    .map(|r| {
                        let id = ids.get(&r.trace_id).copied().ok_or_else(|| {
                            $crate::store::StoreError::Corrupt(format!("inserted execution {} not found", r.trace_id))
                        })?;
                        Ok((*r).clone().recorded(id))
                    })
                    .collect()
            }

            /// Inserts fire claims with multi-row statements; a claim taken already fails the
            /// statement with `Duplicate(Fire)`.
            async fn insert_claims(
                tx: &mut sqlx::Transaction<'_, $db>,
                claims: &[&$crate::store::FireClaim],
            ) -> Result<(), $crate::store::StoreError> {
                let now = $crate::store::ms(chrono::Utc::now());
                for chunk in claims.chunks($crate::store::MULTI_ROW) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new("INSERT INTO job_fire (job_name, fire_time, scheduler_instance, created_at) ");
                    qb.push_values(chunk, |mut b, c| {
                        b.push_bind(c.job_name.clone())
                            .push_bind($crate::store::ms(c.fire_time))
                            .push_bind(c.scheduler_instance.clone())
                            .push_bind(now);
                    });
                    qb.build().execute(&mut **tx).await.map_err($crate::store::StoreError::from_write)?;
                }
                Ok(())
            }

            /// The common case of a batch of cron fires: nobody else claimed any of them, so
            /// all claims and rows go in with a few multi-row statements.
            async fn record_unclaimed(
                tx: &mut sqlx::Transaction<'_, $db>,
                fires: &[($crate::store::FireClaim, Vec<$crate::jobs::NewExecution>)],
            ) -> Result<Vec<$crate::store::FireOutcome>, $crate::store::StoreError> {
                let claims: Vec<&$crate::store::FireClaim> = fires.iter().map(|(c, _)| c).collect();
                Self::insert_claims(tx, &claims).await?;
                let rows: Vec<&$crate::jobs::NewExecution> = fires.iter().flat_map(|(_, rows)| rows).collect();
                let mut recorded = Self::insert_executions(tx, &rows).await?.into_iter();
                Ok(fires
                    .iter()
                    .map(|(_, rows)| $crate::store::FireOutcome::Recorded(recorded.by_ref().take(rows.len()).collect()))
                    .collect())
            }

            /// One UPDATE giving each row of `items` its own values (`CASE trace_id`), for
            /// rows already known to be in a `from` state; columns an item leaves unset keep
            /// their value.
            fn set_many(items: &[&(String, $crate::store::Transition)]) -> sqlx::QueryBuilder<$db> {
                macro_rules! case_column {
                    ($qb:ident, $column:literal, $value:expr) => {
                        if items.iter().any(|(_, t)| $value(t).is_some()) {
                            $qb.push(concat!(", ", $column, " = CASE trace_id"));
                            for (trace, t) in items {
                                if let Some(v) = $value(t) {
                                    $qb.push(" WHEN ").push_bind(trace.clone()).push(" THEN ").push_bind(v);
                                }
                            }
                            $qb.push(concat!(" ELSE ", $column, " END"));
                        }
                    };
                }
                let mut qb = sqlx::QueryBuilder::<$db>::new("UPDATE job_execution SET status = CASE trace_id");
                for (trace, t) in items {
                    qb.push(" WHEN ").push_bind(trace.clone()).push(" THEN ").push_bind(t.to.as_str());
                }
                qb.push(" END");
                case_column!(qb, "executor_instance", |t: &$crate::store::Transition| t.executor_instance.clone());
                case_column!(qb, "start_time", |t: &$crate::store::Transition| t.start_time.map($crate::store::ms));
                case_column!(qb, "finish_time", |t: &$crate::store::Transition| t.finish_time.map($crate::store::ms));
                case_column!(qb, "duration_ms", |t: &$crate::store::Transition| t.duration_ms);
                case_column!(qb, "result_message", |t: &$crate::store::Transition| t.result_message.clone());
                case_column!(qb, "error_message", |t: &$crate::store::Transition| t.error_message.clone());
                qb.push(" WHERE trace_id IN (");
                let mut list = qb.separated(", ");
                for (trace, _) in items {
                    list.push_bind(trace.clone());
                }
                qb.push(")");
                qb
            }

            fn transition_query(trace_id: &str, t: &$crate::store::Transition) -> sqlx::QueryBuilder<$db> {
                let mut qb = sqlx::QueryBuilder::<$db>::new("UPDATE job_execution SET status = ");
                qb.push_bind(t.to.as_str());
                if let Some((owner, due)) = &t.hand_to {
                    qb.push(", scheduler_instance = ").push_bind(owner.clone());
                    qb.push(", due_time = ").push_bind($crate::store::ms(*due));
                }
                if let Some(v) = &t.executor_instance {
                    qb.push(", executor_instance = ").push_bind(v.clone());
                }
                if let Some(v) = t.start_time {
                    qb.push(", start_time = ").push_bind($crate::store::ms(v));
                }
                if let Some(v) = t.finish_time {
                    qb.push(", finish_time = ").push_bind($crate::store::ms(v));
                }
                if let Some(v) = t.duration_ms {
                    qb.push(", duration_ms = ").push_bind(v);
                }
                if let Some(v) = &t.result_message {
                    qb.push(", result_message = ").push_bind(v.clone());
                }
                if let Some(v) = &t.error_message {
                    qb.push(", error_message = ").push_bind(v.clone());
                }
                qb.push(" WHERE trace_id = ").push_bind(trace_id.to_string());
                if let Some((owner, due)) = &t.held_by {
                    qb.push(" AND scheduler_instance = ").push_bind(owner.clone());
                    qb.push(" AND due_time = ").push_bind($crate::store::ms(*due));
                }
                qb.push(" AND status IN (");
                let mut list = qb.separated(", ");
                for s in t.from {
                    list.push_bind(s.as_str());
                }
                qb.push(")");
                qb
            }

            /// Inserts the retry rows of the transitions that applied, in their transaction.
            async fn insert_retries(
                tx: &mut sqlx::Transaction<'_, $db>,
                batch: &[&(String, $crate::store::Transition)],
                applied: &mut [$crate::store::Applied],
            ) -> Result<(), $crate::store::StoreError> {
                let rows: Vec<&$crate::jobs::NewExecution> = batch
                    .iter()
                    .zip(applied.iter())
                    .filter(|(_, a)| a.applied())
                    .filter_map(|((_, t), _)| t.retry.as_ref())
                    .collect();
                if rows.is_empty() {
                    return Ok(());
                }
                let mut inserted = Self::insert_executions(tx, &rows).await?.into_iter();
                for ((_, t), a) in batch.iter().zip(applied.iter_mut()) {
                    if a.applied() && t.retry.is_some() {
                        *a = $crate::store::Applied::Yes(inserted.next().map(Box::new));
                    }
                }
                Ok(())
            }

            async fn keyset_page(
                status: &'static str,
                time_column: &'static str,
                filter_column: &'static str,
                before: chrono::DateTime<chrono::Utc>,
                after: $crate::store::Cursor,
                limit: u32,
                pool: &sqlx::Pool<$db>,
            ) -> Result<Vec<$crate::jobs::Execution>, $crate::store::StoreError> {
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!("SELECT ", execution_columns!(), " FROM job_execution WHERE status = "));
                qb.push_bind(status);
                qb.push(format!(" AND {filter_column} < ")).push_bind($crate::store::ms(before));
                if let Some((t, id)) = after {
                    qb.push(format!(" AND ({time_column} > ")).push_bind(t);
                    qb.push(format!(" OR ({time_column} = ")).push_bind(t).push(" AND id > ").push_bind(id).push("))");
                }
                qb.push(format!(" ORDER BY {time_column}, id LIMIT ")).push_bind(limit as i64);
                let rows = qb.build_query_as::<$crate::store::rows::ExecutionRow>().fetch_all(pool).await?;
                rows.into_iter().map(Self::execution).collect()
            }

            fn execution(row: $crate::store::rows::ExecutionRow) -> Result<$crate::jobs::Execution, $crate::store::StoreError> {
                $crate::jobs::Execution::try_from(row)
            }

            /// The `WHERE` conditions of an execution search (each backed by an index that
            /// ends in `trigger_time`, so the newest-first page is an index range scan).
            fn push_execution_filter(qb: &mut sqlx::QueryBuilder<$db>, f: &$crate::store::ExecutionFilter) {
                qb.push(" WHERE 1 = 1");
                if let Some(j) = &f.job_name {
                    qb.push(" AND job_name = ").push_bind(j.clone());
                }
                if let Some(s) = f.status {
                    qb.push(" AND status = ").push_bind(s.as_str());
                }
                if let Some(t) = f.trigger_type {
                    qb.push(" AND trigger_type = ").push_bind(t.as_str());
                }
                if let Some(e) = &f.executor {
                    qb.push(" AND executor_instance = ").push_bind(e.clone());
                }
                if let Some(from) = f.from {
                    qb.push(" AND trigger_time >= ").push_bind($crate::store::ms(from));
                }
                if let Some(to) = f.to {
                    qb.push(" AND trigger_time <= ").push_bind($crate::store::ms(to));
                }
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> &'static str {
                $backend
            }

            async fn migrate(&self) -> Result<(), $crate::store::StoreError> {
                // Each backend guards concurrent start-ups in its own way.
                self.run_migrations().await
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn create_job(
                &self,
                spec: &$crate::jobs::JobSpec,
                actor: Option<&str>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<$crate::jobs::JobDefinition, $crate::store::StoreError> {
                let pool = self.pool.clone();
                self.creates
                    .create(spec, actor, now, move |batch| Self::write_creates(pool.clone(), batch))
                    .await
            }

            async fn update_job(
                &self,
                spec: &$crate::jobs::JobSpec,
                actor: Option<&str>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<$crate::jobs::JobDefinition>, $crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let revision = Self::next_revision(&mut tx).await?;
                let changed = Self::replace_job(&mut tx, spec, actor, now, revision).await?;
                if changed == 0 {
                    // No such job: the revision taken stays unused.
                    tx.rollback().await?;
                    return Ok(None);
                }
                let job = Self::fetch_job(&mut *tx, spec.name.as_str()).await?;
                tx.commit().await?;
                Ok(job)
            }

            async fn set_job_enabled(
                &self,
                name: &str,
                enabled: bool,
                actor: Option<&str>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<$crate::jobs::JobDefinition>, $crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let revision = Self::next_revision(&mut tx).await?;
                // `enabled_since` first: MySQL evaluates SET left to right, SQLite reads old values.
                let changed = sqlx::query(
                    "UPDATE job_definition SET enabled_since = CASE WHEN enabled THEN enabled_since ELSE ? END, \
                     enabled = ?, updated_at = ?, updated_by = ?, revision = ? WHERE name = ?",
                )
                    .bind($crate::store::ms(now))
                    .bind(enabled)
                    .bind($crate::store::ms(now))
                    .bind(actor)
                    .bind(revision)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if changed == 0 {
                    tx.rollback().await?;
                    return Ok(None);
                }
                let job = Self::fetch_job(&mut *tx, name).await?;
                tx.commit().await?;
                Ok(job)
            }

            async fn delete_job(&self, name: &str, now: chrono::DateTime<chrono::Utc>) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let revision = Self::next_revision(&mut tx).await?;
                let deleted = sqlx::query("DELETE FROM job_definition WHERE name = ?")
                    .bind(name)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                    > 0;
                if !deleted {
                    tx.rollback().await?;
                    return Ok(false);
                }
                Self::tombstone(&mut tx, name, revision, now).await?;
                Self::prune_tombstones(&mut tx, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn get_job(&self, name: &str) -> Result<Option<$crate::jobs::JobDefinition>, $crate::store::StoreError> {
                Self::fetch_job(&self.pool, name).await
            }

            async fn list_jobs(
                &self,
                filter: &$crate::store::JobFilter,
                page: $crate::store::PageRequest,
            ) -> Result<$crate::store::Page<$crate::jobs::JobDefinition>, $crate::store::StoreError> {
                let mut count = sqlx::QueryBuilder::<$db>::new("SELECT COUNT(*) FROM job_definition WHERE 1 = 1");
                Self::push_job_filter(&mut count, filter);
                let total: i64 = count.build_query_scalar().fetch_one(&self.pool).await?;
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!("SELECT ", job_columns!(), " FROM job_definition WHERE 1 = 1"));
                Self::push_job_filter(&mut qb, filter);
                qb.push(" ORDER BY name LIMIT ").push_bind(page.size as i64).push(" OFFSET ").push_bind(page.offset());
                let rows = qb.build_query_as::<$crate::store::rows::JobRow>().fetch_all(&self.pool).await?;
                let jobs = rows.into_iter().map($crate::jobs::JobDefinition::try_from).collect::<Result<Vec<_>, _>>()?;
                Ok($crate::store::Page::new(jobs, page, total))
            }

            async fn load_jobs(&self) -> Result<Vec<$crate::jobs::JobDefinition>, $crate::store::StoreError> {
                let rows = sqlx::query_as::<_, $crate::store::rows::JobRow>(concat!("SELECT ", job_columns!(), " FROM job_definition"))
                    .fetch_all(&self.pool)
                    .await?;
                Ok(Self::readable_jobs(rows).0)
            }

            async fn job_changes_since(&self, since: i64) -> Result<Option<$crate::store::JobChanges>, $crate::store::StoreError> {
                // One snapshot: the counter and the rows and tombstones up to it agree.
                let mut tx = self.pool.begin().await?;
                let (revision, pruned): (i64, i64) = sqlx::query_as("SELECT revision, pruned_revision FROM job_revision WHERE id = 1")
                    .fetch_one(&mut *tx)
                    .await?;
                if since < pruned || since > revision {
                    tx.commit().await?;
                    return Ok(None);
                }
                let mut changes = $crate::store::JobChanges { revision, ..Default::default() };
                if since == revision {
                    tx.commit().await?;
                    return Ok(Some(changes));
                }
                let rows = sqlx::query_as::<_, $crate::store::rows::JobRow>(concat!("SELECT ", job_columns!(), " FROM job_definition WHERE revision > ?"))
                    .bind(since)
                    .fetch_all(&mut *tx)
                    .await?;
                let deleted: Vec<String> = sqlx::query_scalar("SELECT name FROM job_tombstone WHERE revision > ?")
                    .bind(since)
                    .fetch_all(&mut *tx)
                    .await?;
                tx.commit().await?;
                let (changed, unreadable) = Self::readable_jobs(rows);
                // A name both deleted and present was created again after its deletion.
                let present: std::collections::HashSet<&str> = changed.iter().map(|j| j.name().as_str()).collect();
                let mut removed: Vec<String> = deleted.into_iter().filter(|n| !present.contains(n.as_str())).collect();
                removed.extend(unreadable);
                removed.sort();
                removed.dedup();
                changes.changed = changed;
                changes.removed = removed;
                Ok(Some(changes))
            }

            async fn apply_job_document(
                &self,
                apply: &$crate::store::DocumentApply<'_>,
            ) -> Result<$crate::store::DocumentOutcome, $crate::store::StoreError> {
                use $crate::store::{DocumentChanges, DocumentOutcome};
                let now = $crate::store::ms(apply.now);
                // The row to compare and set exists before the transaction, so two instances
                // never race to insert it; the loser of this insert just finds it there.
                let created = sqlx::query(
                    "INSERT INTO job_document (data_id, group_name, content_hash, entry_hashes, applied_at, checked_at) \
                     VALUES (?, ?, '', '{}', ?, ?)",
                )
                .bind(apply.data_id)
                .bind(apply.group)
                .bind(now)
                .bind(now)
                .execute(&self.pool)
                .await;
                if let Err(e) = created
                    && !matches!(&e, sqlx::Error::Database(d) if d.is_unique_violation())
                {
                    return Err(e.into());
                }
                let mut tx = self.pool.begin().await?;
                // Writing the row first locks it until the commit: a second instance applying
                // the same push waits here, then finds the hash already set.
                sqlx::query("UPDATE job_document SET checked_at = ? WHERE data_id = ? AND group_name = ?")
                    .bind(now)
                    .bind(apply.data_id)
                    .bind(apply.group)
                    .execute(&mut *tx)
                    .await?;
                let (stored_hash, entry_hashes): (String, String) = sqlx::query_as(
                    "SELECT content_hash, entry_hashes FROM job_document WHERE data_id = ? AND group_name = ?",
                )
                .bind(apply.data_id)
                .bind(apply.group)
                .fetch_one(&mut *tx)
                .await?;
                if stored_hash == apply.content_hash {
                    tx.commit().await?;
                    return Ok(DocumentOutcome::Unchanged);
                }
                // New content: its writes share one revision (unused when nothing changes).
                let revision = Self::next_revision(&mut tx).await?;
                let previous: std::collections::HashMap<String, String> = serde_json::from_str(&entry_hashes)
                    .map_err(|e| $crate::store::StoreError::Corrupt(format!("job_document.entry_hashes: {e}")))?;
                let existing: std::collections::HashMap<String, String> =
                    sqlx::query_as::<_, (String, String)>("SELECT name, source FROM job_definition")
                        .fetch_all(&mut *tx)
                        .await?
                        .into_iter()
                        .collect();
                let nacos = $crate::jobs::JobSource::Nacos.as_str();
                let mut changes = DocumentChanges::default();
                for job in &apply.document.jobs {
                    let name = job.spec.name.as_str();
                    match existing.get(name) {
                        None => {
                            Self::insert_job(&mut tx, &job.spec, Some(apply.actor), now, revision).await?;
                            changes.created.push(name.to_string());
                        }
                        Some(source) if source == nacos && previous.get(name) == Some(&job.fingerprint) => {}
                        Some(_) => {
                            Self::replace_job(&mut tx, &job.spec, Some(apply.actor), now, revision).await?;
                            changes.updated.push(name.to_string());
                        }
                    }
                    sqlx::query("UPDATE job_definition SET source = ? WHERE name = ? AND source <> ?")
                        .bind(nacos)
                        .bind(name)
                        .bind(nacos)
                        .execute(&mut *tx)
                        .await?;
                }
                let named: std::collections::HashSet<&str> =
                    apply.document.jobs.iter().map(|j| j.spec.name.as_str()).collect();
                let mut gone: Vec<&String> = existing
                    .iter()
                    .filter(|(name, source)| *source == nacos && !named.contains(name.as_str()))
                    .map(|(name, _)| name)
                    .collect();
                gone.sort();
                for name in gone {
                    sqlx::query("DELETE FROM job_definition WHERE name = ?").bind(name).execute(&mut *tx).await?;
                    Self::tombstone(&mut tx, name, revision, now).await?;
                    changes.deleted.push(name.clone());
                }
                if !changes.deleted.is_empty() {
                    Self::prune_tombstones(&mut tx, now).await?;
                }
                let hashes: std::collections::BTreeMap<&str, &str> = apply
                    .document
                    .jobs
                    .iter()
                    .map(|j| (j.spec.name.as_str(), j.fingerprint.as_str()))
                    .collect();
                sqlx::query(
                    "UPDATE job_document SET content_hash = ?, entry_hashes = ?, applied_at = ? WHERE data_id = ? AND group_name = ?",
                )
                .bind(apply.content_hash)
                .bind(serde_json::to_string(&hashes).expect("a map of strings serialises"))
                .bind(now)
                .bind(apply.data_id)
                .bind(apply.group)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(DocumentOutcome::Applied(changes))
            }

            async fn job_revision(&self) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar("SELECT revision FROM job_revision WHERE id = 1").fetch_one(&self.pool).await?)
            }

            async fn record_fire(
                &self,
                claim: Option<&$crate::store::FireClaim>,
                rows: &[$crate::jobs::NewExecution],
            ) -> Result<$crate::store::FireOutcome, $crate::store::StoreError> {
                if let Some(c) = claim {
                    // A claimed fire is a batch of one: same claim and duplicate handling.
                    let mut outcomes = self.record_cron_fires(&[(c.clone(), rows.to_vec())]).await?;
                    return Ok(outcomes.pop().expect("one outcome per fire"));
                }
                let mut tx = self.pool.begin().await?;
                let out = Self::insert_executions(&mut tx, &rows.iter().collect::<Vec<_>>()).await?;
                tx.commit().await?;
                Ok($crate::store::FireOutcome::Recorded(out))
            }

            async fn record_guarded_fire(
                &self,
                job: &str,
                claim: Option<&$crate::store::FireClaim>,
                rows: &[$crate::jobs::NewExecution],
                judge: &$crate::store::OverlapJudge<'_>,
            ) -> Result<($crate::store::FireOutcome, Vec<$crate::jobs::Execution>), $crate::store::StoreError> {
                use $crate::store::{FireOutcome, StoreError, UniqueKey};
                let mut tx = self.pool.begin().await?;
                // The job row's lock orders the guarded fires of the job until the commit. A
                // write, so that SQLite takes its write lock first (see the module doc); the
                // first read below comes after it, so MySQL's snapshot holds the rows of the
                // fires recorded before.
                sqlx::query("UPDATE job_definition SET name = name WHERE name = ?")
                    .bind(job)
                    .execute(&mut *tx)
                    .await?;
                if let Some(c) = claim {
                    match Self::insert_claims(&mut tx, &[c]).await {
                        Ok(()) => {}
                        Err(StoreError::Duplicate(_)) => {
                            tx.rollback().await?;
                            return Ok((FireOutcome::AlreadyFired, Vec::new()));
                        }
                        Err(e) => return Err(e),
                    }
                }
                let open = Self::open_in(&mut *tx, job).await?;
                // Copied only to be marked SKIPPED.
                let skipped: Vec<$crate::jobs::NewExecution>;
                let rows = match judge(&open) {
                    Some(why) => {
                        skipped = rows.iter().cloned().map(|mut r| { r.skip(&why); r }).collect();
                        &skipped[..]
                    }
                    None => rows,
                };
                match Self::insert_executions(&mut tx, &rows.iter().collect::<Vec<_>>()).await {
                    Ok(out) => {
                        tx.commit().await?;
                        Ok((FireOutcome::Recorded(out), open))
                    }
                    Err(StoreError::Duplicate(UniqueKey::ExecutionId)) if claim.is_some() => {
                        tx.rollback().await?;
                        Ok((FireOutcome::AlreadyFired, Vec::new()))
                    }
                    Err(e) => Err(e),
                }
            }

            async fn record_cron_fires(
                &self,
                fires: &[($crate::store::FireClaim, Vec<$crate::jobs::NewExecution>)],
            ) -> Result<Vec<$crate::store::FireOutcome>, $crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                match Self::record_unclaimed(&mut tx, fires).await {
                    Ok(outcomes) => {
                        tx.commit().await?;
                        return Ok(outcomes);
                    }
                    // Some fire was claimed elsewhere (an ownership change): redo the batch
                    // fire by fire, each under a savepoint, skipping the claimed ones.
                    Err($crate::store::StoreError::Duplicate(_)) => {
                        tx.rollback().await?;
                        tx = self.pool.begin().await?;
                    }
                    Err(e) => return Err(e),
                }
                let mut outcomes = Vec::with_capacity(fires.len());
                for (claim, rows) in fires {
                    let mut fire = sqlx::Acquire::begin(&mut *tx).await?;
                    let inserted = match Self::insert_claims(&mut fire, &[claim]).await {
                        Ok(()) => Self::insert_executions(&mut fire, &rows.iter().collect::<Vec<_>>()).await,
                        Err(e) => Err(e),
                    };
                    match inserted {
                        Ok(out) => {
                            fire.commit().await?;
                            outcomes.push($crate::store::FireOutcome::Recorded(out));
                        }
                        Err($crate::store::StoreError::Duplicate($crate::store::UniqueKey::Fire | $crate::store::UniqueKey::ExecutionId)) => {
                            fire.rollback().await?;
                            outcomes.push($crate::store::FireOutcome::AlreadyFired);
                        }
                        Err(e) => return Err(e),
                    }
                }
                tx.commit().await?;
                Ok(outcomes)
            }

            async fn last_fire_time(&self, job: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, $crate::store::StoreError> {
                Ok(sqlx::query_scalar("SELECT MAX(fire_time) FROM job_fire WHERE job_name = ?")
                    .bind(job)
                    .fetch_one(&self.pool)
                    .await?)
            }

            async fn recent_fires(
                &self,
                since: chrono::DateTime<chrono::Utc>,
            ) -> Result<std::collections::HashMap<String, chrono::DateTime<chrono::Utc>>, $crate::store::StoreError> {
                let rows: Vec<(String, chrono::DateTime<chrono::Utc>)> =
                    sqlx::query_as("SELECT job_name, MAX(fire_time) FROM job_fire WHERE fire_time >= ? GROUP BY job_name")
                        .bind($crate::store::ms(since))
                        .fetch_all(&self.pool)
                        .await?;
                Ok(rows.into_iter().collect())
            }

            async fn purge_fire_claims(&self, before: chrono::DateTime<chrono::Utc>) -> Result<u64, $crate::store::StoreError> {
                // In chunks along the fire_time index: at a thousand fires a second an hour of
                // claims is millions of rows, too many for one statement's locks and undo.
                let before = $crate::store::ms(before);
                let mut purged = 0;
                loop {
                    let bound: Option<chrono::DateTime<chrono::Utc>> =
                        sqlx::query_scalar("SELECT fire_time FROM job_fire WHERE fire_time < ? ORDER BY fire_time LIMIT 1 OFFSET ?")
                            .bind(before)
                            .bind($crate::store::PURGE_CHUNK - 1)
                            .fetch_optional(&self.pool)
                            .await?;
                    let (sql, upto) = match bound {
                        Some(b) => ("DELETE FROM job_fire WHERE fire_time <= ?", b),
                        None => ("DELETE FROM job_fire WHERE fire_time < ?", before),
                    };
                    purged += sqlx::query(sql).bind(upto).execute(&self.pool).await?.rows_affected();
                    if bound.is_none() {
                        return Ok(purged);
                    }
                }
            }

            async fn get_execution(&self, trace_id: &str) -> Result<Option<$crate::jobs::Execution>, $crate::store::StoreError> {
                sqlx::query_as::<_, $crate::store::rows::ExecutionRow>(concat!("SELECT ", execution_columns!(), " FROM job_execution WHERE trace_id = ?"))
                    .bind(trace_id)
                    .fetch_optional(&self.pool)
                    .await?
                    .map(Self::execution)
                    .transpose()
            }

            async fn list_executions(
                &self,
                job: &str,
                status: Option<$crate::jobs::ExecutionStatus>,
                page: $crate::store::PageRequest,
            ) -> Result<$crate::store::Page<$crate::jobs::Execution>, $crate::store::StoreError> {
                let mut count = sqlx::QueryBuilder::<$db>::new("SELECT COUNT(*) FROM job_execution WHERE job_name = ");
                count.push_bind(job.to_string());
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!("SELECT ", execution_columns!(), " FROM job_execution WHERE job_name = "));
                qb.push_bind(job.to_string());
                if let Some(s) = status {
                    count.push(" AND status = ").push_bind(s.as_str());
                    qb.push(" AND status = ").push_bind(s.as_str());
                }
                let total: i64 = count.build_query_scalar().fetch_one(&self.pool).await?;
                qb.push(" ORDER BY trigger_time DESC, id DESC LIMIT ").push_bind(page.size as i64).push(" OFFSET ").push_bind(page.offset());
                let rows = qb.build_query_as::<$crate::store::rows::ExecutionRow>().fetch_all(&self.pool).await?;
                let items = rows.into_iter().map(Self::execution).collect::<Result<Vec<_>, _>>()?;
                Ok($crate::store::Page::new(items, page, total))
            }

            async fn search_executions(
                &self,
                filter: &$crate::store::ExecutionFilter,
                page: $crate::store::PageRequest,
                count_cap: i64,
            ) -> Result<$crate::store::Page<$crate::jobs::Execution>, $crate::store::StoreError> {
                // Counting stops at the cap: an exact count of tens of millions of rows would
                // scan them all on every page.
                let mut count = sqlx::QueryBuilder::<$db>::new("SELECT COUNT(*) FROM (SELECT 1 AS one FROM job_execution");
                Self::push_execution_filter(&mut count, filter);
                count.push(" LIMIT ").push_bind(count_cap + 1).push(") counted");
                let counted: i64 = count.build_query_scalar().fetch_one(&self.pool).await?;
                let total = counted.min(count_cap);
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!("SELECT ", execution_columns!(), " FROM job_execution"));
                Self::push_execution_filter(&mut qb, filter);
                qb.push(" ORDER BY trigger_time DESC, id DESC LIMIT ").push_bind(page.size as i64).push(" OFFSET ").push_bind(page.offset());
                let rows = qb.build_query_as::<$crate::store::rows::ExecutionRow>().fetch_all(&self.pool).await?;
                let items = rows.into_iter().map(Self::execution).collect::<Result<Vec<_>, _>>()?;
                let mut found = $crate::store::Page::new(items, page, total);
                if counted > count_cap {
                    found.total_elements_capped = Some(true);
                }
                Ok(found)
            }

            async fn transition(&self, trace_id: &str, t: &$crate::store::Transition) -> Result<$crate::store::Applied, $crate::store::StoreError> {
                if t.retry.is_none() {
                    let changed = Self::transition_query(trace_id, t).build().execute(&self.pool).await?.rows_affected() == 1;
                    return Ok(if changed { $crate::store::Applied::Yes(None) } else { $crate::store::Applied::No });
                }
                let mut tx = self.pool.begin().await?;
                let changed = Self::transition_query(trace_id, t).build().execute(&mut *tx).await?.rows_affected() == 1;
                let mut applied = [if changed { $crate::store::Applied::Yes(None) } else { $crate::store::Applied::No }];
                let item = (trace_id.to_string(), t.clone());
                Self::insert_retries(&mut tx, &[&item], &mut applied).await?;
                tx.commit().await?;
                let [a] = applied;
                Ok(a)
            }

            async fn transitions(&self, batch: &[(String, $crate::store::Transition)]) -> Result<Vec<$crate::store::Applied>, $crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                // Compare: the current status of every row, locked until the commit.
                let mut current: std::collections::HashMap<String, String> = std::collections::HashMap::with_capacity(batch.len());
                let traces: Vec<&str> = batch.iter().map(|(t, _)| t.as_str()).collect();
                for chunk in traces.chunks($crate::store::MULTI_ROW) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new("SELECT trace_id, status FROM job_execution WHERE trace_id IN (");
                    let mut list = qb.separated(", ");
                    for t in chunk {
                        list.push_bind(t.to_string());
                    }
                    qb.push(")").push($lock_rows);
                    let found: Vec<(String, String)> = qb.build_query_as().fetch_all(&mut *tx).await?;
                    current.extend(found);
                }
                // Decide in order, as if the transitions were applied one by one.
                let mut applied = Vec::with_capacity(batch.len());
                let mut winners: Vec<&(String, $crate::store::Transition)> = Vec::new();
                for item @ (trace, t) in batch {
                    let wins = match current.get_mut(trace.as_str()) {
                        Some(status) if t.from.iter().any(|f| f.as_str() == status.as_str()) => {
                            *status = t.to.as_str().to_string();
                            true
                        }
                        _ => false,
                    };
                    applied.push(if wins { $crate::store::Applied::Yes(None) } else { $crate::store::Applied::No });
                    if wins {
                        winners.push(item);
                    }
                }
                // Set: one statement for all winners, a row that moves more than once in the
                // batch (RUNNING, then its result) with its moves folded into one.
                let merged = $crate::store::fold_moves(&winners);
                let merged: Vec<&(String, $crate::store::Transition)> = merged.iter().collect();
                for chunk in merged.chunks($crate::store::MULTI_ROW / 2) {
                    Self::set_many(chunk).build().execute(&mut *tx).await?;
                }
                let all: Vec<&(String, $crate::store::Transition)> = batch.iter().collect();
                Self::insert_retries(&mut tx, &all, &mut applied).await?;
                tx.commit().await?;
                Ok(applied)
            }

            async fn withdraw_fires(
                &self,
                fires: &[($crate::store::FireClaim, Vec<String>)],
            ) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let mut removed = 0;
                for (claim, traces) in fires {
                    for trace in traces {
                        removed += sqlx::query(
                            "DELETE FROM job_execution WHERE trace_id = ? AND status = 'PENDING' AND scheduler_instance = ?",
                        )
                        .bind(trace)
                        .bind(&claim.scheduler_instance)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    }
                    sqlx::query("DELETE FROM job_fire WHERE job_name = ? AND fire_time = ? AND scheduler_instance = ?")
                        .bind(&claim.job_name)
                        .bind($crate::store::ms(claim.fire_time))
                        .bind(&claim.scheduler_instance)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(removed)
            }

            async fn fire_executions(&self, job: &str, fire: &str) -> Result<Vec<$crate::jobs::Execution>, $crate::store::StoreError> {
                // The fire's ids all start with `{fire}:` (and sort before `{fire};`): a range
                // of the unique execution_id index, with no LIKE pattern to escape. The job is
                // checked below, so that no planner prefers the job's whole history.
                let rows = sqlx::query_as::<_, $crate::store::rows::ExecutionRow>(concat!(
                    "SELECT ", execution_columns!(), " FROM job_execution WHERE execution_id >= ? AND execution_id < ? ORDER BY id"
                ))
                .bind(format!("{fire}:"))
                .bind(format!("{fire};"))
                .fetch_all(&self.pool)
                .await?;
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    let exec = Self::execution(row)?;
                    // A longer fire key sharing the prefix (job names may hold `:`) is another fire.
                    if exec.job_name == job && $crate::jobs::fire_key(&exec.execution_id) == fire {
                        out.push(exec);
                    }
                }
                Ok(out)
            }

            async fn pending_before(&self, due_before: chrono::DateTime<chrono::Utc>, after: $crate::store::Cursor, limit: u32) -> Result<Vec<$crate::jobs::Execution>, $crate::store::StoreError> {
                // Along (status, due_time); InnoDB appends the id to that index.
                Self::keyset_page("PENDING", "due_time", "due_time", due_before, after, limit, &self.pool).await
            }

            async fn running_before(&self, started_before: chrono::DateTime<chrono::Utc>, after: $crate::store::Cursor, limit: u32) -> Result<Vec<$crate::jobs::Execution>, $crate::store::StoreError> {
                // Along (status, trigger_time); the start time is filtered on the way.
                Self::keyset_page("RUNNING", "trigger_time", "start_time", started_before, after, limit, &self.pool).await
            }

            async fn activity_since(&self, since: chrono::DateTime<chrono::Utc>) -> Result<$crate::store::Activity, $crate::store::StoreError> {
                // Every status is listed so the (status, trigger_time) index serves a range
                // per status instead of a scan of the whole table.
                let statuses = $crate::jobs::ExecutionStatus::ALL;
                let mut qb = sqlx::QueryBuilder::<$db>::new("SELECT status, COUNT(*) FROM job_execution WHERE status IN (");
                let mut list = qb.separated(", ");
                for s in statuses {
                    list.push_bind(s.as_str());
                }
                qb.push(") AND trigger_time >= ").push_bind($crate::store::ms(since)).push(" GROUP BY status");
                let counts: Vec<(String, i64)> = qb.build_query_as().fetch_all(&self.pool).await?;
                let by_status = counts
                    .into_iter()
                    .map(|(s, n)| s.parse().map(|s| (s, n)).map_err(|m: String| $crate::store::StoreError::Corrupt(format!("job_execution.status: {m}"))))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut qb = sqlx::QueryBuilder::<$db>::new("SELECT COUNT(*) FROM (SELECT DISTINCT job_name, fire_time FROM job_execution WHERE status IN (");
                let mut list = qb.separated(", ");
                for s in statuses {
                    list.push_bind(s.as_str());
                }
                qb.push(") AND trigger_time >= ").push_bind($crate::store::ms(since)).push(" AND retry_count = 0) fires");
                let fires: i64 = qb.build_query_scalar().fetch_one(&self.pool).await?;
                let mut qb = sqlx::QueryBuilder::<$db>::new("SELECT fire_time, start_time FROM job_execution WHERE status IN (");
                let mut list = qb.separated(", ");
                for s in statuses {
                    list.push_bind(s.as_str());
                }
                qb.push(") AND trigger_time >= ").push_bind($crate::store::ms(since))
                    .push(" AND trigger_type = 'CRON' AND retry_count = 0 AND start_time IS NOT NULL ORDER BY trigger_time DESC, id DESC LIMIT ")
                    .push_bind($crate::store::ACTIVITY_DELAY_SAMPLE);
                let cron_starts: Vec<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> = qb.build_query_as().fetch_all(&self.pool).await?;
                Ok($crate::store::Activity { fires, by_status, cron_starts })
            }

            async fn purge_executions_before(
                &self,
                before: chrono::DateTime<chrono::Utc>,
                pace: $crate::store::PurgePace,
            ) -> Result<u64, $crate::store::StoreError> {
                self.purge_in_chunks(None, before, pace).await
            }

            async fn cap_job_executions(
                &self,
                job: &str,
                keep: u32,
                pace: $crate::store::PurgePace,
            ) -> Result<u64, $crate::store::StoreError> {
                // The newest row beyond the `keep` newest: it and everything older goes.
                let first_gone: Option<(chrono::DateTime<chrono::Utc>, i64)> = sqlx::query_as(
                    "SELECT trigger_time, id FROM job_execution WHERE job_name = ? ORDER BY trigger_time DESC, id DESC LIMIT 1 OFFSET ?",
                )
                .bind(job)
                .bind(keep as i64)
                .fetch_optional(&self.pool)
                .await?;
                let Some((t, id)) = first_gone else {
                    return Ok(0);
                };
                // Everything up to (t, id) inclusive: strictly before (t, id + 1).
                self.purge_in_chunks(Some((job, id + 1)), t, pace).await
            }

            async fn job_names(&self) -> Result<Vec<String>, $crate::store::StoreError> {
                Ok(sqlx::query_scalar("SELECT name FROM job_definition ORDER BY name").fetch_all(&self.pool).await?)
            }
        }

        impl $store {
            /// Deletes final rows ordered before (`before`, `before_id`) in (trigger_time, id)
            /// order, of one job when `job` is given, `pace.chunk` at a time with `pace`'s rest
            /// after each. A keyset cursor walks the index, so rows that stay (PENDING,
            /// RUNNING) are passed over once, not rescanned by every chunk. `before_id` None
            /// means "trigger_time < before".
            async fn purge_in_chunks(
                &self,
                job: Option<(&str, i64)>,
                before: chrono::DateTime<chrono::Utc>,
                pace: $crate::store::PurgePace,
            ) -> Result<u64, $crate::store::StoreError> {
                type Key = (chrono::DateTime<chrono::Utc>, i64);
                let before = $crate::store::ms(before);
                let chunk = pace.chunk.max(1);
                // The range being purged, and the cursor: rows after `from` only.
                let range = |qb: &mut sqlx::QueryBuilder<$db>, from: Option<Key>| {
                    match job {
                        Some((name, before_id)) => {
                            qb.push(" job_name = ").push_bind(name.to_string());
                            qb.push(" AND (trigger_time < ").push_bind(before)
                                .push(" OR (trigger_time = ").push_bind(before).push(" AND id < ").push_bind(before_id).push("))");
                        }
                        None => {
                            qb.push(" trigger_time < ").push_bind(before);
                        }
                    }
                    if let Some((t, id)) = from {
                        qb.push(" AND (trigger_time > ").push_bind(t)
                            .push(" OR (trigger_time = ").push_bind(t).push(" AND id > ").push_bind(id).push("))");
                    }
                };
                let mut from: Option<Key> = None;
                let mut purged = 0;
                loop {
                    let started = std::time::Instant::now();
                    let mut q = sqlx::QueryBuilder::<$db>::new("SELECT trigger_time, id FROM job_execution WHERE");
                    range(&mut q, from);
                    q.push(" ORDER BY trigger_time, id LIMIT 1 OFFSET ").push_bind(chunk as i64 - 1);
                    let bound: Option<Key> = q.build_query_as().fetch_optional(&self.pool).await?;
                    let mut d = sqlx::QueryBuilder::<$db>::new("DELETE FROM job_execution WHERE");
                    range(&mut d, from);
                    if let Some((t, id)) = bound {
                        d.push(" AND (trigger_time < ").push_bind(t)
                            .push(" OR (trigger_time = ").push_bind(t).push(" AND id <= ").push_bind(id).push("))");
                    }
                    d.push(" AND status IN (");
                    let mut list = d.separated(", ");
                    for s in $crate::jobs::ExecutionStatus::ALL.into_iter().filter(|s| s.is_final()) {
                        list.push_bind(s.as_str());
                    }
                    d.push(")");
                    let n = d.build().execute(&self.pool).await?.rows_affected();
                    pace.purged.increment(n);
                    purged += n;
                    match bound {
                        Some(b) => from = Some(b),
                        None => return Ok(purged),
                    }
                    tokio::time::sleep(pace.pause_after(started.elapsed())).await;
                }
            }
        }
    };
}
