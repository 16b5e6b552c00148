//! API authentication (docs/operations.md, "Security"): who a request comes from, the role
//! that gives it, and the namespaces it may act in, as extractors, so a handler states what it
//! needs in its signature.
//!
//! A request is identified by, in this order:
//! - an authenticating proxy's identity header, only from the addresses `[auth.proxy]`
//!   trusts;
//! - a bearer token from the configuration (`auth.tokens`), compared as a SHA-256 digest in
//!   constant time against every configured one, so neither the comparison nor the lookup
//!   leaks which prefix matched;
//! - a bearer token created through the API (`/api/v1/tokens`), looked up by its digest: the
//!   database holds no secret, and a revoked or rotated-away token is refused from the next
//!   request on.
//!
//! 401 means "who are you?" (missing or unknown token), 403 "not allowed" (role too low, or a
//! namespace the token may not act in).

use std::marker::PhantomData;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::config::{AuthSettings, IpBlock, ProxySettings, Role};
use crate::jobs::{JobName, Namespace};
use crate::store::TokenStore;

/// The prefix of every token the API creates, so a secret is recognisable (in a log, by a
/// secret scanner) and a configured token is never looked up in the database.
pub const MANAGED_PREFIX: &str = "jf_";

/// The configured tokens, digested once at start-up, and the proxy trusted to name users.
#[derive(Debug, Clone)]
pub struct Tokens {
    enabled: bool,
    principals: Vec<([u8; 32], Principal)>,
    proxy: Option<(ProxySettings, Vec<IpBlock>)>,
    pub protect_metrics: bool,
}

/// The hex SHA-256 of a token's secret, as stored.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

impl Tokens {
    pub fn new(settings: &AuthSettings) -> Self {
        let principals = settings
            .tokens
            .iter()
            .filter_map(|t| {
                let digest: [u8; 32] = match (&t.token, &t.token_sha256) {
                    (Some(plain), _) => Sha256::digest(plain.expose().as_bytes()).into(),
                    (None, Some(h)) => hex::decode(h).ok()?.try_into().ok()?,
                    (None, None) => return None,
                };
                let namespaces = t.namespaces.as_ref().map(|list| {
                    list.iter()
                        .filter_map(|n| Namespace::parse(n).ok())
                        .collect()
                });
                Some((
                    digest,
                    Principal {
                        name: Some(t.name.clone()),
                        role: t.role,
                        namespaces,
                    },
                ))
            })
            .collect::<Vec<_>>();
        let proxy = settings
            .proxy
            .clone()
            .map(|p| (p.trusted_blocks(), p))
            .map(|(blocks, p)| (p, blocks));
        // Without tokens or a proxy there is nobody to authenticate (standalone trial use);
        // nacos mode refuses to start that way unless auth was switched off explicitly.
        let enabled = settings.enabled && (!principals.is_empty() || proxy.is_some());
        Self {
            enabled,
            principals,
            proxy,
            protect_metrics: settings.protect_metrics,
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether `name` is the name of a configured token (the API creates no token of that
    /// name).
    pub fn configured(&self, name: &str) -> bool {
        self.principals
            .iter()
            .any(|(_, p)| p.name.as_deref() == Some(name))
    }

    /// The configured principal a bearer token belongs to.
    fn identify(&self, token: &str) -> Option<&Principal> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (digest, principal) in &self.principals {
            // Every principal is compared, each in constant time: the answer's timing says
            // nothing of which digest matched, or how much of one.
            if bool::from(digest.ct_eq(&presented)) && found.is_none() {
                found = Some(principal);
            }
        }
        found
    }

    /// The user the trusted proxy names, when the request comes from it.
    fn proxied(&self, parts: &Parts) -> Option<Result<Principal, AuthError>> {
        let (proxy, blocks) = self.proxy.as_ref()?;
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>()?.0.ip();
        if !blocks.iter().any(|b| b.contains(peer)) {
            return None;
        }
        let user = parts
            .headers
            .get(proxy.header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|u| !u.is_empty())?;
        // Groups come comma-separated, on one header line or on several (oauth2-proxy sends
        // a line per group).
        let by_group = proxy
            .groups_header
            .iter()
            .flat_map(|h| parts.headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .flat_map(|line| line.split(','))
            .filter_map(|g| proxy.groups.get(g.trim()))
            .max();
        let role = [proxy.users.get(user), by_group]
            .into_iter()
            .flatten()
            .max()
            .copied()
            .or(proxy.default_role);
        Some(match role {
            Some(role) => Ok(Principal {
                name: Some(user.chars().take(100).collect()),
                role,
                namespaces: None,
            }),
            None => Err(AuthError::Unauthenticated),
        })
    }

    /// Who sent the request (any role).
    pub async fn identify_request(
        &self,
        parts: &Parts,
        tokens: &dyn TokenStore,
    ) -> Result<Principal, AuthError> {
        if !self.enabled {
            return Ok(Principal::anonymous_admin());
        }
        if let Some(proxied) = self.proxied(parts) {
            return proxied;
        }
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or(AuthError::Unauthenticated)?;
        if let Some(p) = self.identify(token) {
            return Ok(p.clone());
        }
        if !token.starts_with(MANAGED_PREFIX) {
            return Err(AuthError::Unauthenticated);
        }
        match tokens.token_by_secret(&digest(token)).await {
            Ok(Some(t)) => Ok(Principal {
                name: Some(t.name),
                role: t.role,
                namespaces: t.namespaces.map(|list| {
                    list.iter()
                        .filter_map(|n| Namespace::parse(n).ok())
                        .collect()
                }),
            }),
            Ok(None) => Err(AuthError::Unauthenticated),
            Err(e) => {
                tracing::error!(error = %e, "cannot read the API tokens");
                Err(AuthError::Unavailable)
            }
        }
    }

    /// Who sent the request, when the role is at least `required`.
    pub async fn authorize(
        &self,
        parts: &Parts,
        required: Role,
        tokens: &dyn TokenStore,
    ) -> Result<Principal, AuthError> {
        let principal = self.identify_request(parts, tokens).await?;
        if principal.role < required {
            return Err(AuthError::Forbidden(required));
        }
        Ok(principal)
    }
}

/// Who made the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    /// The token's (or the proxied user's) name; `None` when authentication is off.
    pub name: Option<String>,
    pub role: Role,
    /// The namespaces it may act in; `None`: every namespace.
    pub namespaces: Option<Vec<Namespace>>,
}

impl Principal {
    fn anonymous_admin() -> Self {
        Self {
            name: None,
            role: Role::Admin,
            namespaces: None,
        }
    }

    /// Whether it may see and act on what is in `namespace`.
    pub fn may_act_in(&self, namespace: &Namespace) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.contains(namespace))
    }

    /// Whether it may act in every namespace (what is not in a namespace: tokens, the audit
    /// trail, the cluster's totals).
    pub fn unrestricted(&self) -> bool {
        self.namespaces.is_none()
    }

    /// The name the audit trail records: the token's, or `anonymous` with authentication off.
    pub fn actor(&self) -> &str {
        self.name.as_deref().unwrap_or("anonymous")
    }
}

#[derive(Debug)]
pub enum AuthError {
    Unauthenticated,
    Forbidden(Role),
    /// A restricted token, and a namespace outside its list.
    Namespace(Namespace),
    /// Every namespace was needed and the token has a list.
    Restricted,
    /// The tokens could not be read (the database).
    Unavailable,
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        match self {
            Self::Unauthenticated => {
                let mut resp = ApiError::Unauthorized("a valid bearer token is required".into())
                    .into_response();
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"jobflow\""),
                );
                resp
            }
            Self::Forbidden(role) => ApiError::Forbidden(
                format!("this needs the {role:?} role or higher").to_lowercase(),
            )
            .into_response(),
            Self::Namespace(ns) => {
                ApiError::Forbidden(format!("this token may not act in namespace `{ns}`"))
                    .into_response()
            }
            Self::Restricted => {
                ApiError::Forbidden("this needs a token that may act in every namespace".into())
                    .into_response()
            }
            Self::Unavailable => {
                ApiError::Unavailable("the API tokens cannot be read now".into()).into_response()
            }
        }
    }
}

impl AuthError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::Namespace(_) | Self::Restricted => StatusCode::FORBIDDEN,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

pub trait RequiredRole: Send + Sync + 'static {
    const ROLE: Role;
}

pub struct Viewer;
pub struct Operator;
pub struct Admin;

impl RequiredRole for Viewer {
    const ROLE: Role = Role::Viewer;
}
impl RequiredRole for Operator {
    const ROLE: Role = Role::Operator;
}
impl RequiredRole for Admin {
    const ROLE: Role = Role::Admin;
}

/// Extractor: a request with at least role `R` that may act in every namespace (what belongs
/// to none: tokens, the audit trail, the cluster).
pub struct Auth<R: RequiredRole>(pub Principal, PhantomData<R>);

impl<R: RequiredRole> Auth<R> {
    /// The name recorded in created_by / updated_by.
    pub fn actor(&self) -> Option<&str> {
        self.0.name.as_deref()
    }
}

impl<R: RequiredRole> FromRequestParts<AppState> for Auth<R> {
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AuthError> {
        let Caller(p, _) = Caller::<R>::from_request_parts(parts, state).await?;
        if !p.unrestricted() {
            return Err(AuthError::Restricted);
        }
        Ok(Self(p, PhantomData))
    }
}

/// Extractor: a request with at least role `R`, whatever namespaces its token may act in,
/// for what shows nothing of any namespace (the caller itself, a cron preview).
pub struct Caller<R: RequiredRole>(pub Principal, PhantomData<R>);

impl<R: RequiredRole> FromRequestParts<AppState> for Caller<R> {
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AuthError> {
        let p = state
            .tokens
            .authorize(parts, R::ROLE, state.store.as_ref())
            .await?;
        Ok(Self(p, PhantomData))
    }
}

/// The `namespace` query parameter of every job and execution route.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NamespaceParam {
    /// The namespace (1-40 of `a-z 0-9 -`); absent: `default`.
    #[param(example = "payments")]
    pub namespace: Option<String>,
}

/// Extractor: a request with at least role `R`, in the namespace it names
/// (`?namespace=`, absent: `default`), which its token may act in.
pub struct Scoped<R: RequiredRole> {
    pub principal: Principal,
    pub namespace: Namespace,
    /// Whether the request named the namespace (`?namespace=`).
    pub named: bool,
    role: PhantomData<R>,
}

impl<R: RequiredRole> Scoped<R> {
    /// The name recorded in created_by / updated_by.
    pub fn actor(&self) -> Option<&str> {
        self.principal.name.as_deref()
    }

    /// The job the path names, in this namespace; a name no job can have is a 404 like any
    /// name without a job.
    pub fn job(&self, name: &str) -> Result<JobName, ApiError> {
        JobName::parse_in(&self.namespace, name).map_err(|_| ApiError::job_not_found(name))
    }

    /// Whether the job whose key is `key` is in this namespace.
    pub fn holds(&self, key: &str) -> bool {
        Namespace::of_key(key) == self.namespace.as_str()
    }
}

impl<R: RequiredRole> FromRequestParts<AppState> for Scoped<R> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let principal = state
            .tokens
            .authorize(parts, R::ROLE, state.store.as_ref())
            .await
            .map_err(IntoResponse::into_response)?;
        let raw = axum::extract::Query::<NamespaceParam>::try_from_uri(&parts.uri)
            .map_err(|e| ApiError::BadRequest(e.body_text()).into_response())?
            .0
            .namespace;
        let namespace = Namespace::or_default(raw.as_deref())
            .map_err(|m| ApiError::field("namespace", m).into_response())?;
        if !principal.may_act_in(&namespace) {
            return Err(AuthError::Namespace(namespace).into_response());
        }
        Ok(Self {
            principal,
            namespace,
            named: raw.is_some(),
            role: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use async_trait::async_trait;
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::config::{Secret, TokenSettings};
    use crate::store::{StoreError, StoredToken};

    /// Tokens by the digest of their secret.
    #[derive(Default)]
    struct Managed(Mutex<Vec<(String, StoredToken)>>);

    #[async_trait]
    impl TokenStore for Managed {
        async fn create_token(&self, t: &StoredToken, d: &str) -> Result<bool, StoreError> {
            self.0.lock().unwrap().push((d.to_string(), t.clone()));
            Ok(true)
        }
        async fn list_tokens(&self) -> Result<Vec<StoredToken>, StoreError> {
            Ok(self
                .0
                .lock()
                .unwrap()
                .iter()
                .map(|(_, t)| t.clone())
                .collect())
        }
        async fn rotate_token(
            &self,
            _: &str,
            _: &str,
            _: DateTime<Utc>,
        ) -> Result<Option<StoredToken>, StoreError> {
            Ok(None)
        }
        async fn delete_token(&self, name: &str) -> Result<bool, StoreError> {
            let mut all = self.0.lock().unwrap();
            let before = all.len();
            all.retain(|(_, t)| t.name != name);
            Ok(all.len() < before)
        }
        async fn token_by_secret(&self, d: &str) -> Result<Option<StoredToken>, StoreError> {
            let all = self.0.lock().unwrap();
            Ok(all.iter().find(|(x, _)| x == d).map(|(_, t)| t.clone()))
        }
    }

    fn parts(auth: Option<&str>) -> Parts {
        let mut b = axum::http::Request::builder();
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        b.body(()).unwrap().into_parts().0
    }

    /// A request from `peer` with `headers`.
    fn from(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = axum::http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let mut p = b.body(()).unwrap().into_parts().0;
        p.extensions.insert(ConnectInfo(
            format!("{peer}:40000").parse::<SocketAddr>().unwrap(),
        ));
        p
    }

    fn configured() -> Tokens {
        Tokens::new(&AuthSettings {
            enabled: true,
            tokens: vec![
                TokenSettings {
                    name: "viewer".into(),
                    role: Role::Viewer,
                    token: Some(Secret::new("viewer-token-0123456789")),
                    ..Default::default()
                },
                TokenSettings {
                    name: "ops".into(),
                    role: Role::Operator,
                    token_sha256: Some(hex::encode(Sha256::digest(b"operator-token-0123456789"))),
                    namespaces: Some(vec!["payments".into()]),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn roles_and_tokens() {
        let tokens = configured();
        let none = Managed::default();
        for bad in [None, Some("Bearer nope"), Some("Basic dmlld2VyOng=")] {
            assert!(matches!(
                tokens.authorize(&parts(bad), Role::Viewer, &none).await,
                Err(AuthError::Unauthenticated)
            ));
        }
        let viewer = Some("Bearer viewer-token-0123456789");
        let p = tokens
            .authorize(&parts(viewer), Role::Viewer, &none)
            .await
            .unwrap();
        assert_eq!(p.name.as_deref(), Some("viewer"));
        assert!(p.unrestricted());
        assert!(matches!(
            tokens
                .authorize(&parts(viewer), Role::Operator, &none)
                .await,
            Err(AuthError::Forbidden(Role::Operator))
        ));
        let ops = Some("Bearer operator-token-0123456789");
        let p = tokens
            .authorize(&parts(ops), Role::Operator, &none)
            .await
            .unwrap();
        assert_eq!(p.name.as_deref(), Some("ops"));
        assert!(p.may_act_in(&Namespace::parse("payments").unwrap()));
        assert!(!p.may_act_in(&Namespace::default()));
        assert!(
            tokens
                .authorize(&parts(ops), Role::Admin, &none)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_managed_token_is_found_by_its_digest_until_it_is_deleted() {
        let tokens = configured();
        let store = Managed::default();
        let secret = "jf_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG";
        let t = StoredToken {
            name: "ci".into(),
            role: Role::Operator,
            namespaces: Some(vec!["team-a".into()]),
            created_at: Utc::now(),
            created_by: None,
            rotated_at: None,
        };
        store.create_token(&t, &digest(secret)).await.unwrap();
        let bearer = format!("Bearer {secret}");
        let p = tokens
            .authorize(&parts(Some(&bearer)), Role::Operator, &store)
            .await
            .unwrap();
        assert_eq!(
            p,
            Principal {
                name: Some("ci".into()),
                role: Role::Operator,
                namespaces: Some(vec![Namespace::parse("team-a").unwrap()]),
            }
        );
        store.delete_token("ci").await.unwrap();
        assert!(matches!(
            tokens
                .authorize(&parts(Some(&bearer)), Role::Viewer, &store)
                .await,
            Err(AuthError::Unauthenticated)
        ));
    }

    #[tokio::test]
    async fn the_proxy_header_counts_only_from_a_trusted_address() {
        let tokens = Tokens::new(&AuthSettings {
            proxy: Some(ProxySettings {
                header: "X-Forwarded-User".into(),
                groups_header: Some("X-Forwarded-Groups".into()),
                trusted: vec!["10.1.0.0/16".into(), "::1".into()],
                users: BTreeMap::from([("alice".into(), Role::Admin)]),
                groups: BTreeMap::from([("ops".into(), Role::Operator)]),
                default_role: None,
            }),
            ..Default::default()
        });
        let none = Managed::default();
        let alice = [("x-forwarded-user", "alice")];
        let p = tokens
            .authorize(&from("10.1.2.3", &alice), Role::Admin, &none)
            .await
            .unwrap();
        assert_eq!(p.name.as_deref(), Some("alice"));
        let p = tokens
            .identify_request(&from("[::1]", &alice), &none)
            .await
            .unwrap();
        assert_eq!(p.role, Role::Admin);
        // From elsewhere the header is nobody's word.
        for peer in ["10.2.0.1", "127.0.0.1"] {
            assert!(matches!(
                tokens.identify_request(&from(peer, &alice), &none).await,
                Err(AuthError::Unauthenticated)
            ));
        }
        // A group's role; a user in no map and no default role is refused.
        let bob = [
            ("x-forwarded-user", "bob"),
            ("x-forwarded-groups", "dev, ops"),
        ];
        let p = tokens
            .identify_request(&from("10.1.0.9", &bob), &none)
            .await
            .unwrap();
        assert_eq!(p.role, Role::Operator);
        let dave = [
            ("x-forwarded-user", "dave"),
            ("x-forwarded-groups", "dev"),
            ("x-forwarded-groups", "ops"),
        ];
        let p = tokens
            .identify_request(&from("10.1.0.9", &dave), &none)
            .await
            .unwrap();
        assert_eq!(
            p.role,
            Role::Operator,
            "a group on a line of its own counts"
        );
        let carol = [("x-forwarded-user", "carol")];
        assert!(
            tokens
                .identify_request(&from("10.1.0.9", &carol), &none)
                .await
                .is_err()
        );
    }

    #[test]
    fn ip_blocks() {
        let block = |s: &str| IpBlock::parse(s).unwrap();
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(block("10.0.0.0/8").contains(ip("10.255.0.1")));
        assert!(!block("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(block("127.0.0.1").contains(ip("127.0.0.1")));
        assert!(!block("127.0.0.1").contains(ip("127.0.0.2")));
        assert!(block("127.0.0.1").contains(ip("::ffff:127.0.0.1")));
        assert!(block("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(block("fd00::/8").contains(ip("fd12::1")));
        assert!(!block("fd00::/8").contains(ip("fe80::1")));
        assert!(!block("::1").contains(ip("127.0.0.1")));
        for bad in ["10.0.0.0/33", "::/129", "nope", "10.0.0.0/x"] {
            assert!(IpBlock::parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn no_tokens_means_no_authentication() {
        let tokens = Tokens::new(&AuthSettings::default());
        assert!(!tokens.enabled());
        let p = tokens
            .authorize(&parts(None), Role::Admin, &Managed::default())
            .await
            .unwrap();
        assert!(p.unrestricted());
    }
}
