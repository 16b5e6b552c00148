//! The portable SQL layer under [`SqlStore`](super::SqlStore): one implementation of the store,
//! compiled once, that runs on MySQL 8, MariaDB 10.11 and SQLite 3.
//!
//! The store's statements are portable (`?` placeholders, no vendor functions: times are
//! computed in Rust and bound), so the only thing that differs per backend at run time is how
//! values are bound and rows are read. [`Sql`] collects a statement's text and its values as
//! [`Arg`]s; [`Db`] and [`Tx`] hand it to the backend's sqlx driver, which binds each value as
//! it always has (MySQL `DATETIME(3)`, SQLite RFC 3339 text), and return [`Row`]s read by column
//! name. Statement text is built from constant fragments and placeholders only: every value is
//! bound, never formatted into the text.
//!
//! SQLite has one writer: a write transaction starts with its write (see the store), so
//! SQLite takes the write lock at once and waits on `busy_timeout` instead of failing a
//! read-to-write upgrade. [`Backend::lock_rows`] ends a read that must lock what it reads on
//! MySQL; SQLite's single writer makes it unnecessary there.

use chrono::{DateTime, Utc};
use sqlx::error::BoxDynError;
use sqlx::mysql::{MySql, MySqlArguments, MySqlPool, MySqlRow};
use sqlx::sqlite::{Sqlite, SqliteArguments, SqlitePool, SqliteRow};
use sqlx::{Arguments, AssertSqlSafe, Database, Decode, Executor, IntoArguments, Row as _, Type};

use super::StoreError;

/// Which database a [`Db`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    MySql,
    Sqlite,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Self::MySql => "mysql",
            Self::Sqlite => "sqlite",
        }
    }

    /// Starts an INSERT that leaves rows whose key exists already as they are.
    pub fn insert_ignore(self) -> &'static str {
        match self {
            Self::MySql => "INSERT IGNORE INTO ",
            Self::Sqlite => "INSERT OR IGNORE INTO ",
        }
    }

    /// Names `job_execution` in a statement that finds its rows by `trace_id`: on MySQL
    /// through the unique index `uk_trace_id`, whatever the optimizer estimates. On a young
    /// table a batch's keys are a large share of the rows (256 traces of 1,000), and MariaDB
    /// would rather scan it; a locking scan (`FOR UPDATE`, `UPDATE`, `DELETE`, `INSERT …
    /// SELECT`) locks every row it passes and the gaps between them, so a batch of results
    /// waited for rows it does not change, held up the inserts of the fires claimed ahead and
    /// deadlocked with other batches (docs/design.md, "Row locks"). SQLite's single writer
    /// takes no row locks.
    pub fn executions_by_trace(self) -> &'static str {
        match self {
            Self::MySql => "job_execution FORCE INDEX (uk_trace_id)",
            Self::Sqlite => "job_execution",
        }
    }

    /// Starts a DELETE of `job_execution` rows found by `trace_id` (see
    /// [`executions_by_trace`](Self::executions_by_trace)): MySQL takes an index hint only in
    /// the multi-table form.
    pub fn delete_executions_by_trace(self) -> &'static str {
        match self {
            Self::MySql => "DELETE job_execution FROM job_execution FORCE INDEX (uk_trace_id)",
            Self::Sqlite => "DELETE FROM job_execution",
        }
    }

    /// Names `job_definition` in a statement that finds its rows by name, through the unique
    /// index `uk_job_name` on MySQL, for the reason of
    /// [`executions_by_trace`](Self::executions_by_trace).
    pub fn jobs_by_name(self) -> &'static str {
        match self {
            Self::MySql => "job_definition FORCE INDEX (uk_job_name)",
            Self::Sqlite => "job_definition",
        }
    }

    /// Ends a SELECT whose rows stay locked until the commit (nothing on SQLite, whose single
    /// writer holds the whole database).
    pub fn lock_rows(self) -> &'static str {
        match self {
            Self::MySql => " FOR UPDATE",
            Self::Sqlite => "",
        }
    }
}

/// A value bound to a placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Bool(bool),
    Time(Option<DateTime<Utc>>),
}

impl Arg {
    /// A NULL of this value's type.
    pub fn null(&self) -> Self {
        match self {
            Self::Text(_) => Self::Text(None),
            Self::Int(_) | Self::Bool(_) => Self::Int(None),
            Self::Time(_) => Self::Time(None),
        }
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Self::Text(Some(v))
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Self::Text(Some(v.to_string()))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Self::Text(Some(v.clone()))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Self::Text(v)
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Self::Text(v.map(str::to_string))
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Self::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Self::Int(v)
    }
}
impl From<u32> for Arg {
    fn from(v: u32) -> Self {
        Self::Int(Some(v.into()))
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}
impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Self {
        Self::Time(Some(super::ms(v)))
    }
}
impl From<Option<DateTime<Utc>>> for Arg {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Self::Time(v.map(super::ms))
    }
}

/// A statement being built: its text and the values of its placeholders, in order.
#[derive(Debug, Clone, Default)]
pub struct Sql {
    text: String,
    args: Vec<Arg>,
}

impl Sql {
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            args: Vec::new(),
        }
    }

    /// The statement's text, as the database prepares it.
    #[cfg(test)]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The values bound to its placeholders, in order.
    #[cfg(test)]
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// Appends constant text.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a placeholder bound to `value`.
    pub fn bind(&mut self, value: impl Into<Arg>) -> &mut Self {
        self.text.push('?');
        self.args.push(value.into());
        self
    }

    /// Appends another statement's text and values.
    pub fn append(&mut self, other: Sql) -> &mut Self {
        self.text.push_str(&other.text);
        self.args.extend(other.args);
        self
    }

    /// Appends `(?, ?, …)` bound to `values` (`(NULL)` when there are none).
    pub fn list<T: Into<Arg>>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Self {
        self.text.push('(');
        let mut empty = true;
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.bind(v);
            empty = false;
        }
        // `IN ()` is a syntax error; `IN (NULL)` matches nothing.
        if empty {
            self.text.push_str("NULL");
        }
        self.text.push(')');
        self
    }

    /// Appends `(a, b) VALUES (?, ?), (?, ?)` for rows of `(column, value)` pairs, which all
    /// name the same columns in the same order.
    pub fn values(
        &mut self,
        rows: impl IntoIterator<Item = Vec<(&'static str, Arg)>>,
    ) -> &mut Self {
        for (i, row) in rows.into_iter().enumerate() {
            if i == 0 {
                let names: Vec<&str> = row.iter().map(|(c, _)| *c).collect();
                self.text.push('(');
                self.text.push_str(&names.join(", "));
                self.text.push_str(") VALUES ");
            } else {
                self.text.push_str(", ");
            }
            self.list(row.into_iter().map(|(_, v)| v));
        }
        self
    }

    /// Appends `a = ?, b = ?` for `(column, value)` pairs.
    pub fn set(&mut self, pairs: impl IntoIterator<Item = (&'static str, Arg)>) -> &mut Self {
        for (i, (column, value)) in pairs.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.text.push_str(column);
            self.text.push_str(" = ");
            self.bind(value);
        }
        self
    }
}

/// A row read back, its columns read by name.
pub enum Row {
    MySql(MySqlRow),
    Sqlite(SqliteRow),
}

/// A type both backends read from a column.
pub trait Column:
    for<'r> Decode<'r, MySql> + Type<MySql> + for<'r> Decode<'r, Sqlite> + Type<Sqlite>
{
}
impl<T> Column for T where
    T: for<'r> Decode<'r, MySql> + Type<MySql> + for<'r> Decode<'r, Sqlite> + Type<Sqlite>
{
}

impl Row {
    /// The value of column `name`; a value that does not read as `T` is corrupt data.
    pub fn get<T: Column>(&self, name: &str) -> Result<T, StoreError> {
        let read = match self {
            Self::MySql(r) => r.try_get(name),
            Self::Sqlite(r) => r.try_get(name),
        };
        read.map_err(|e| StoreError::Corrupt(format!("column {name}: {e}")))
    }

    /// The value of the column at `index` (for statements whose columns have no names, such
    /// as `MAX(…)`).
    pub fn at<T: Column>(&self, index: usize) -> Result<T, StoreError> {
        let read = match self {
            Self::MySql(r) => r.try_get(index),
            Self::Sqlite(r) => r.try_get(index),
        };
        read.map_err(|e| StoreError::Corrupt(format!("column #{index}: {e}")))
    }
}

/// What one backend's driver needs to run a [`Sql`].
trait Driver: Database {
    fn arguments(args: Vec<Arg>) -> Result<Self::Arguments, BoxDynError>;
    fn row(row: Self::Row) -> Row;
    fn affected(result: &Self::QueryResult) -> u64;
}

impl Driver for MySql {
    fn arguments(args: Vec<Arg>) -> Result<MySqlArguments, BoxDynError> {
        let mut out = MySqlArguments::default();
        for a in args {
            match a {
                Arg::Text(v) => out.add(v)?,
                Arg::Int(v) => out.add(v)?,
                Arg::Bool(v) => out.add(v)?,
                Arg::Time(v) => out.add(v)?,
            }
        }
        Ok(out)
    }
    fn row(row: MySqlRow) -> Row {
        Row::MySql(row)
    }
    fn affected(result: &sqlx::mysql::MySqlQueryResult) -> u64 {
        result.rows_affected()
    }
}

impl Driver for Sqlite {
    fn arguments(args: Vec<Arg>) -> Result<SqliteArguments, BoxDynError> {
        let mut out = SqliteArguments::default();
        for a in args {
            match a {
                Arg::Text(v) => out.add(v)?,
                Arg::Int(v) => out.add(v)?,
                Arg::Bool(v) => out.add(v)?,
                Arg::Time(v) => out.add(v)?,
            }
        }
        Ok(out)
    }
    fn row(row: SqliteRow) -> Row {
        Row::Sqlite(row)
    }
    fn affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }
}

fn statement<D: Driver>(q: Sql) -> Result<sqlx::query::Query<'static, D, D::Arguments>, sqlx::Error>
where
    D::Arguments: IntoArguments<D>,
{
    let args = D::arguments(q.args).map_err(sqlx::Error::Encode)?;
    Ok(sqlx::query_with(AssertSqlSafe(q.text), args))
}

async fn execute<'c, D: Driver>(
    e: impl Executor<'c, Database = D>,
    q: Sql,
) -> Result<u64, sqlx::Error>
where
    D::Arguments: IntoArguments<D>,
{
    Ok(D::affected(&statement::<D>(q)?.execute(e).await?))
}

async fn fetch_all<'c, D: Driver>(
    e: impl Executor<'c, Database = D>,
    q: Sql,
) -> Result<Vec<Row>, sqlx::Error>
where
    D::Arguments: IntoArguments<D>,
{
    Ok(statement::<D>(q)?
        .fetch_all(e)
        .await?
        .into_iter()
        .map(D::row)
        .collect())
}

async fn fetch_optional<'c, D: Driver>(
    e: impl Executor<'c, Database = D>,
    q: Sql,
) -> Result<Option<Row>, sqlx::Error>
where
    D::Arguments: IntoArguments<D>,
{
    Ok(statement::<D>(q)?.fetch_optional(e).await?.map(D::row))
}

/// A pool of connections to one database.
#[derive(Clone)]
pub enum Db {
    /// `returning`: the server takes `INSERT … RETURNING` (MariaDB; MySQL 8 does not).
    MySql { pool: MySqlPool, returning: bool },
    /// SQLite's one writer, and the connections plain reads go to: the writer's own for the
    /// scheduling store, read-only ones beside it for the API, the check at each instant and
    /// the engine's refreshes (`store::connect_beside`), which in WAL mode read while the
    /// writer writes.
    Sqlite {
        writer: SqlitePool,
        reads: SqlitePool,
    },
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Self::MySql { .. } => Backend::MySql,
            Self::Sqlite { .. } => Backend::Sqlite,
        }
    }

    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Self::MySql { pool, returning } => Tx::MySql(pool.begin().await?, *returning),
            Self::Sqlite { writer, .. } => Tx::Sqlite(writer.begin().await?),
        })
    }

    /// Runs `q`; the number of rows it changed.
    pub async fn execute(&self, q: Sql) -> Result<u64, sqlx::Error> {
        match self {
            Self::MySql { pool, .. } => execute(pool, q).await,
            Self::Sqlite { writer, .. } => execute(writer, q).await,
        }
    }

    /// Runs `q`, a read outside any transaction.
    pub async fn fetch_all(&self, q: Sql) -> Result<Vec<Row>, sqlx::Error> {
        match self {
            Self::MySql { pool, .. } => fetch_all(pool, q).await,
            Self::Sqlite { reads, .. } => fetch_all(reads, q).await,
        }
    }

    /// Runs `q`, a read outside any transaction.
    pub async fn fetch_optional(&self, q: Sql) -> Result<Option<Row>, sqlx::Error> {
        match self {
            Self::MySql { pool, .. } => fetch_optional(pool, q).await,
            Self::Sqlite { reads, .. } => fetch_optional(reads, q).await,
        }
    }
}

/// A transaction; dropped without [`Tx::commit`], it rolls back.
pub enum Tx {
    /// With the server's `returning` (see [`Db::MySql`]).
    MySql(sqlx::Transaction<'static, MySql>, bool),
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

impl Tx {
    pub fn backend(&self) -> Backend {
        match self {
            Self::MySql(..) => Backend::MySql,
            Self::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Whether an INSERT can return the rows it wrote (`INSERT … RETURNING`): on MariaDB and
    /// SQLite, not on MySQL 8.
    pub fn returning(&self) -> bool {
        match self {
            Self::MySql(_, returning) => *returning,
            Self::Sqlite(_) => true,
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Self::MySql(t, _) => t.commit().await,
            Self::Sqlite(t) => t.commit().await,
        }
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Self::MySql(t, _) => t.rollback().await,
            Self::Sqlite(t) => t.rollback().await,
        }
    }

    pub async fn execute(&mut self, q: Sql) -> Result<u64, sqlx::Error> {
        match self {
            Self::MySql(t, _) => execute(&mut **t, q).await,
            Self::Sqlite(t) => execute(&mut **t, q).await,
        }
    }

    pub async fn fetch_all(&mut self, q: Sql) -> Result<Vec<Row>, sqlx::Error> {
        match self {
            Self::MySql(t, _) => fetch_all(&mut **t, q).await,
            Self::Sqlite(t) => fetch_all(&mut **t, q).await,
        }
    }

    pub async fn fetch_optional(&mut self, q: Sql) -> Result<Option<Row>, sqlx::Error> {
        match self {
            Self::MySql(t, _) => fetch_optional(&mut **t, q).await,
            Self::Sqlite(t) => fetch_optional(&mut **t, q).await,
        }
    }

    /// Starts a savepoint: what follows can be undone alone ([`Tx::undo_savepoint`]) while
    /// the transaction goes on.
    pub async fn savepoint(&mut self) -> Result<(), sqlx::Error> {
        self.execute(Sql::new("SAVEPOINT part")).await.map(drop)
    }

    pub async fn keep_savepoint(&mut self) -> Result<(), sqlx::Error> {
        self.execute(Sql::new("RELEASE SAVEPOINT part"))
            .await
            .map(drop)
    }

    pub async fn undo_savepoint(&mut self) -> Result<(), sqlx::Error> {
        self.execute(Sql::new("ROLLBACK TO SAVEPOINT part"))
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_binds_every_value_and_formats_none() {
        let mut q = Sql::new("INSERT INTO t ");
        q.values([
            vec![("a", Arg::from("x")), ("b", Arg::from(1_i64))],
            vec![("a", Arg::from("y')--")), ("b", Arg::Int(None))],
        ]);
        assert_eq!(q.text, "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)");
        assert_eq!(q.args.len(), 4);
        let mut u = Sql::new("UPDATE t SET ");
        u.set([("a", Arg::from("z")), ("b", Arg::Bool(true))])
            .push(" WHERE k IN ")
            .list(["p", "q"]);
        assert_eq!(u.text, "UPDATE t SET a = ?, b = ? WHERE k IN (?, ?)");
    }

    #[test]
    fn an_empty_list_matches_nothing_instead_of_failing() {
        let mut q = Sql::new("DELETE FROM t WHERE k IN ");
        q.list(Vec::<String>::new()).push(" AND s = 'x'");
        assert_eq!(q.text, "DELETE FROM t WHERE k IN (NULL) AND s = 'x'");
        assert!(q.args.is_empty());
    }
}
