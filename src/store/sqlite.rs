//! SQLite: the embedded default for trying JobFlow out and for development. One file, created
//! on first run.
//!
//! SQLite has a single writer; concurrent writers on several connections spend their time in
//! its busy-wait backoff (milliseconds per retry), which the fire benchmark showed as hundreds
//! of milliseconds of delay in a burst. One connection serialises the statements without any
//! waiting, so this store uses one, whatever `database.max_connections` says.
//!
//! Reads need not wait for it: in WAL mode a reader sees the last commit without blocking the
//! writer or being blocked by it. The API, the check at each instant and the engine's
//! refreshes read through read-only connections of their own ([`beside`]), so a console stays
//! responsive while the writer is busy with a burst of fires; their writes still go through
//! the one writer.

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
    let options = options(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal);
    let path = options.get_filename();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
    }
    let writer = pool(options, 1).await?;
    Ok(Db::Sqlite {
        reads: writer.clone(),
        writer,
    })
}

/// The database of `writer` (from [`connect`]) with `connections` read-only connections of its
/// own for plain reads, and the writer for everything else.
pub async fn beside(url: &str, writer: &SqlitePool, connections: u32) -> Result<Db, StoreError> {
    // The writer has created the file and put it in WAL mode, which the file keeps.
    let reads = pool(options(url)?.read_only(true), connections).await?;
    Ok(Db::Sqlite {
        writer: writer.clone(),
        reads,
    })
}

fn options(url: &str) -> Result<SqliteConnectOptions, StoreError> {
    Ok(SqliteConnectOptions::from_str(url)?.busy_timeout(Duration::from_secs(10)))
}

async fn pool(options: SqliteConnectOptions, connections: u32) -> Result<SqlitePool, StoreError> {
    Ok(SqlitePoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await?)
}

/// One writer: sqlx's own migration run needs no further lock.
pub async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}
