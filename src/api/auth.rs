//! API authentication: bearer tokens with roles (docs/operations.md, "Security"), as extractors so a handler
//! states the role it needs in its signature.
//!
//! Tokens are kept only as SHA-256 digests and compared in constant time against every
//! configured token, so neither the comparison nor the lookup leaks which prefix matched.
//! 401 means "who are you?" (missing or unknown token), 403 "not allowed" (role too low).

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::config::{AuthSettings, Role};

/// The configured tokens, digested once at start-up.
#[derive(Debug, Clone)]
pub struct Tokens {
    enabled: bool,
    principals: Vec<([u8; 32], String, Role)>,
    pub protect_metrics: bool,
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
                Some((digest, t.name.clone(), t.role))
            })
            .collect::<Vec<_>>();
        // Without tokens there is nobody to authenticate (standalone trial use); nacos mode
        // refuses to start that way unless auth was switched off explicitly.
        let enabled = settings.enabled && !principals.is_empty();
        Self {
            enabled,
            principals,
            protect_metrics: settings.protect_metrics,
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The principal a bearer token belongs to.
    fn identify(&self, token: &str) -> Option<(&str, Role)> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (digest, name, role) in &self.principals {
            // Every principal is compared, each in constant time: the answer's timing says
            // nothing of which digest matched, or how much of one.
            if bool::from(digest.ct_eq(&presented)) && found.is_none() {
                found = Some((name.as_str(), *role));
            }
        }
        found
    }

    /// Checks the request's `Authorization` header for `required`.
    pub fn authorize(&self, parts: &Parts, required: Role) -> Result<Principal, AuthError> {
        if !self.enabled {
            return Ok(Principal {
                name: None,
                role: Role::Admin,
            });
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
        let (name, role) = self.identify(token).ok_or(AuthError::Unauthenticated)?;
        if role < required {
            return Err(AuthError::Forbidden(required));
        }
        Ok(Principal {
            name: Some(name.to_string()),
            role,
        })
    }
}

/// Who made the request (`None` when authentication is off).
#[derive(Debug, Clone)]
pub struct Principal {
    pub name: Option<String>,
    pub role: Role,
}

#[derive(Debug)]
pub enum AuthError {
    Unauthenticated,
    Forbidden(Role),
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
        }
    }
}

impl AuthError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
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

/// Extractor: the request carries a token with at least role `R`.
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
        state
            .tokens
            .authorize(parts, R::ROLE)
            .map(|p| Self(p, PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Secret, TokenSettings};

    fn parts(auth: Option<&str>) -> Parts {
        let mut b = axum::http::Request::builder();
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn roles_and_tokens() {
        let tokens = Tokens::new(&AuthSettings {
            enabled: true,
            tokens: vec![
                TokenSettings {
                    name: "viewer".into(),
                    role: Role::Viewer,
                    token: Some(Secret::new("viewer-token-0123456789")),
                    token_sha256: None,
                    ..Default::default()
                },
                TokenSettings {
                    name: "ops".into(),
                    role: Role::Operator,
                    token: None,
                    token_sha256: Some(hex::encode(Sha256::digest(b"operator-token-0123456789"))),
                    ..Default::default()
                },
            ],
            protect_metrics: false,
        });
        assert!(matches!(
            tokens.authorize(&parts(None), Role::Viewer),
            Err(AuthError::Unauthenticated)
        ));
        assert!(matches!(
            tokens.authorize(&parts(Some("Bearer nope")), Role::Viewer),
            Err(AuthError::Unauthenticated)
        ));
        assert!(matches!(
            tokens.authorize(&parts(Some("Basic dmlld2VyOng=")), Role::Viewer),
            Err(AuthError::Unauthenticated)
        ));
        let p = tokens
            .authorize(&parts(Some("Bearer viewer-token-0123456789")), Role::Viewer)
            .unwrap();
        assert_eq!(p.name.as_deref(), Some("viewer"));
        assert!(matches!(
            tokens.authorize(
                &parts(Some("Bearer viewer-token-0123456789")),
                Role::Operator
            ),
            Err(AuthError::Forbidden(Role::Operator))
        ));
        let p = tokens
            .authorize(
                &parts(Some("Bearer operator-token-0123456789")),
                Role::Operator,
            )
            .unwrap();
        assert_eq!(p.name.as_deref(), Some("ops"));
        assert!(
            tokens
                .authorize(
                    &parts(Some("Bearer operator-token-0123456789")),
                    Role::Admin
                )
                .is_err()
        );
    }

    #[test]
    fn no_tokens_means_no_authentication() {
        let tokens = Tokens::new(&AuthSettings::default());
        assert!(!tokens.enabled());
        assert!(tokens.authorize(&parts(None), Role::Admin).is_ok());
    }
}
