//! [`TokenStore`] over SQL: API tokens created through `/api/v1/tokens`, kept as the SHA-256
//! of their secret only (docs/operations.md, "Tokens").

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::{Row, Sql};
use super::{SqlStore, StoreError};
use crate::config::Role;
use crate::jobs::choose;

/// A token as stored, without its secret.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredToken {
    pub name: String,
    pub role: Role,
    /// The namespaces it may act in; `None`: every namespace.
    pub namespaces: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub rotated_at: Option<DateTime<Utc>>,
}

/// API tokens.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Stores `token` with the digest of its secret; `false` when a token of that name exists.
    async fn create_token(
        &self,
        token: &StoredToken,
        secret_sha256: &str,
    ) -> Result<bool, StoreError>;
    /// Every token, by name.
    async fn list_tokens(&self) -> Result<Vec<StoredToken>, StoreError>;
    /// Gives the token a new secret (the old one stops working); `None`: no such token.
    async fn rotate_token(
        &self,
        name: &str,
        secret_sha256: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<StoredToken>, StoreError>;
    /// Deletes the token; `false`: no such token.
    async fn delete_token(&self, name: &str) -> Result<bool, StoreError>;
    /// The token whose secret has this digest.
    async fn token_by_secret(&self, secret_sha256: &str)
    -> Result<Option<StoredToken>, StoreError>;
}

#[async_trait]
impl TokenStore for SqlStore {
    async fn create_token(
        &self,
        token: &StoredToken,
        secret_sha256: &str,
    ) -> Result<bool, StoreError> {
        let namespaces = token
            .namespaces
            .as_ref()
            .map(|n| serde_json::Value::from(n.clone()).to_string());
        // A name taken is no error to report by key: MySQL names a primary key `PRIMARY`
        // whatever its table.
        let mut q = Sql::new(self.db.backend().insert_ignore());
        q.push("api_token ");
        q.values([vec![
            ("name", token.name.as_str().into()),
            ("role", <&str>::from(token.role).into()),
            ("namespaces", namespaces.into()),
            ("secret_sha256", secret_sha256.into()),
            ("created_at", token.created_at.into()),
            ("created_by", token.created_by.as_deref().into()),
        ]]);
        Ok(self.db.execute(q).await? == 1)
    }

    async fn list_tokens(&self) -> Result<Vec<StoredToken>, StoreError> {
        let q = Sql::new("SELECT * FROM api_token ORDER BY name");
        self.db.fetch_all(q).await?.iter().map(token).collect()
    }

    async fn rotate_token(
        &self,
        name: &str,
        secret_sha256: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<StoredToken>, StoreError> {
        let mut q = Sql::new("UPDATE api_token SET ");
        q.set([
            ("secret_sha256", secret_sha256.into()),
            ("rotated_at", at.into()),
        ]);
        q.push(" WHERE name = ").bind(name);
        if self.db.execute(q).await? == 0 {
            return Ok(None);
        }
        let mut q = Sql::new("SELECT * FROM api_token WHERE name = ");
        q.bind(name);
        self.db
            .fetch_optional(q)
            .await?
            .as_ref()
            .map(token)
            .transpose()
    }

    async fn delete_token(&self, name: &str) -> Result<bool, StoreError> {
        let mut q = Sql::new("DELETE FROM api_token WHERE name = ");
        q.bind(name);
        Ok(self.db.execute(q).await? > 0)
    }

    async fn token_by_secret(
        &self,
        secret_sha256: &str,
    ) -> Result<Option<StoredToken>, StoreError> {
        let mut q = Sql::new("SELECT * FROM api_token WHERE secret_sha256 = ");
        q.bind(secret_sha256);
        self.db
            .fetch_optional(q)
            .await?
            .as_ref()
            .map(token)
            .transpose()
    }
}

fn token(row: &Row) -> Result<StoredToken, StoreError> {
    let name: String = row.get("name")?;
    let corrupt = |field: &str, m: String| {
        StoreError::Corrupt(format!("token `{name}`: column {field}: {m}"))
    };
    let role: Role = choose(&row.get::<String>("role")?).map_err(|m| corrupt("role", m))?;
    let namespaces = row
        .get::<Option<String>>("namespaces")?
        .map(|t| serde_json::from_str::<Vec<String>>(&t))
        .transpose()
        .map_err(|e| corrupt("namespaces", e.to_string()))?;
    Ok(StoredToken {
        role,
        namespaces,
        created_at: row.get("created_at")?,
        created_by: row.get("created_by")?,
        rotated_at: row.get("rotated_at")?,
        name,
    })
}
