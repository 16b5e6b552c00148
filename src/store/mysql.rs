//! MySQL 8 / MariaDB 10.11: the production backend shared by every scheduler instance.
//!
//! Migrations run under a named lock of our own, because sqlx's (`GET_LOCK(name, -1)`, wait
//! forever) is answered NULL at once by MariaDB, so instances started together raced each
//! other into "migration … is partially applied". `GET_LOCK` with a positive timeout works
//! on both servers.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::StoreError;
use super::sql::Db;

/// The named lock every instance takes before migrating.
pub const MIGRATION_LOCK: &str = "jobflow_migrate";
/// How long an instance waits for another one's migration before giving up.
pub const MIGRATION_LOCK_WAIT: Duration = Duration::from_secs(60);

const MIGRATOR: Migrator = sqlx::migrate!("./migrations/mysql");

/// `url` is `mysql://` (or `mariadb://`); `password` overrides the one in the URL. Connects
/// at once, so that a database that does not answer fails the start.
pub async fn connect(
    url: &str,
    password: Option<&str>,
    max_connections: u32,
) -> Result<Db, StoreError> {
    let pool = pool_options(max_connections)
        .connect_with(options(url, password)?)
        .await?;
    // MariaDB names itself in its version (`10.11.19-MariaDB-…`); MySQL 8 has no RETURNING.
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&pool)
        .await?;
    let returning = version.contains("MariaDB");
    Ok(Db::MySql { pool, returning })
}

/// A pool of its own beside one [`connect`] opened (whose server answered, and said whether
/// it returns inserted rows): no connection is opened until one is asked for. A connection
/// is driven by the I/O of the runtime it was opened on, so a pool opened at once here would
/// hand the API, which runs on a runtime of its own, a connection whose answers wait for the
/// scheduling runtime to poll for them; opened lazily, the API's connections are opened by
/// its own requests, on its own runtime (docs/benchmarks.md, "The API's connections on its
/// own runtime").
pub fn beside(
    url: &str,
    password: Option<&str>,
    max_connections: u32,
    returning: bool,
) -> Result<Db, StoreError> {
    let pool = pool_options(max_connections).connect_lazy_with(options(url, password)?);
    Ok(Db::MySql { pool, returning })
}

fn options(url: &str, password: Option<&str>) -> Result<MySqlConnectOptions, StoreError> {
    let url = url
        .strip_prefix("mariadb://")
        .map(|rest| format!("mysql://{rest}"))
        .unwrap_or_else(|| url.to_string());
    let options = MySqlConnectOptions::from_str(&url)?.timezone(Some("+00:00".into()));
    Ok(match password {
        Some(p) => options.password(p),
        None => options,
    })
}

fn pool_options(max_connections: u32) -> MySqlPoolOptions {
    MySqlPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
}

/// Applies the pending migrations while holding [`MIGRATION_LOCK`] on one connection: the
/// instances that wait find the schema migrated when their turn comes, and apply nothing.
pub async fn migrate(pool: &MySqlPool) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await?;
    // The lock belongs to the session: closing the connection releases it whatever happens
    // below, even if this future is dropped.
    conn.close_on_drop();
    let granted: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, ?)")
        .bind(MIGRATION_LOCK)
        .bind(MIGRATION_LOCK_WAIT.as_secs())
        .fetch_one(&mut *conn)
        .await?;
    if granted != Some(1) {
        return Err(StoreError::MigrationLock(format!(
            "could not take the database lock `{MIGRATION_LOCK}` within {}s \
             (GET_LOCK answered {}): another instance is migrating this schema, or a \
             session still holds the lock (see SELECT IS_USED_LOCK('{MIGRATION_LOCK}'))",
            MIGRATION_LOCK_WAIT.as_secs(),
            granted.map_or("NULL".to_string(), |g| g.to_string()),
        )));
    }
    let mut migrator = MIGRATOR;
    migrator.set_locking(false);
    // `run_direct` is `run` on a connection we hold: `run(&mut conn)` trips a known
    // "Acquire is not general enough" error inside the Send future of the trait.
    let migrated = migrator.run_direct(None, &mut *conn, false).await;
    let released = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await;
    migrated?;
    released?;
    Ok(())
}
