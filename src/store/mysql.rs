//! MySQL 8 / MariaDB 10.11: the production backend shared by every scheduler instance.

use std::str::FromStr;
use std::time::Duration;

use sqlx::MySql;
use sqlx::migrate::Migrator;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::StoreError;

pub struct MySqlStore {
    pool: MySqlPool,
}

impl MySqlStore {
    const MIGRATOR: Migrator = sqlx::migrate!("./migrations/mysql");

    /// `url` is `mysql://` (or `mariadb://`); `password` overrides the one in the URL.
    pub async fn connect(
        url: &str,
        password: Option<&str>,
        max_connections: u32,
    ) -> Result<Self, StoreError> {
        let url = url
            .strip_prefix("mariadb://")
            .map(|rest| format!("mysql://{rest}"))
            .unwrap_or_else(|| url.to_string());
        let mut options = MySqlConnectOptions::from_str(&url)?.timezone(Some("+00:00".into()));
        if let Some(p) = password {
            options = options.password(p);
        }
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }
}

sql_store!(MySqlStore, MySql, "mysql", " FOR UPDATE");
