//! SQLite: the embedded default for trying JobFlow out and for development. One file, created
//! on first run; WAL mode so the API reads while the engine writes.

use std::str::FromStr;
use std::time::Duration;

use sqlx::Sqlite;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::StoreError;

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    const MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
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
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }
}

sql_store!(SqliteStore, Sqlite, "sqlite");
