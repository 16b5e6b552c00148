//! SQLite: the embedded default for trying JobFlow out and for development. One file, created
//! on first run.
//!
//! SQLite has a single writer; concurrent writers on several connections spend their time in
//! its busy-wait backoff (milliseconds per retry), which the fire benchmark showed as hundreds
//! of milliseconds of delay in a burst. One connection serialises the statements without any
//! waiting, so this store uses one, whatever `database.max_connections` says.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::StoreError;
use super::sql::Db;

const MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

pub async fn connect(url: &str) -> Result<Db, StoreError> {
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    let path = options.get_filename();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await?;
    Ok(Db::Sqlite(pool))
}

/// One writer: sqlx's own migration run needs no further lock.
pub async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}
