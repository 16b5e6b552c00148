//! The one API error type. Client errors say precisely what is wrong (RFC 7807
//! `application/problem+json`, with the offending fields); server errors are logged with their
//! cause and answered without internal detail.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::dispatch::DispatchError;
use crate::jobs::FieldError;
use crate::store::{StoreError, UniqueKey};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("request body is larger than the limit")]
    PayloadTooLarge,
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotImplemented(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// RFC 7807 problem details.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The fields that were rejected, named as sent (camelCase).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

impl ApiError {
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        Self::Validation(vec![FieldError::new(field, message)])
    }

    pub fn job_not_found(name: &str) -> Self {
        Self::NotFound(format!("job `{}` does not exist", truncate(name)))
    }

    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Validation(_) => (StatusCode::BAD_REQUEST, "validation-error"),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad-request"),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not-found"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type")
            }
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::NotImplemented(_) => (StatusCode::NOT_IMPLEMENTED, "not-implemented"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal-error"),
        }
    }
}

/// Echoed user input is cut short so an error never reflects a huge value.
pub fn truncate(s: &str) -> String {
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s.to_string()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind) = self.parts();
        let detail = match &self {
            Self::Validation(errors) => errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            Self::Internal(e) => {
                tracing::error!(error = format!("{e:#}"), "request failed");
                "the server failed to handle this request; the cause is in its log".into()
            }
            other => other.to_string(),
        };
        let errors = match self {
            Self::Validation(errors) => errors,
            _ => Vec::new(),
        };
        let problem = Problem {
            kind: format!("urn:jobflow:problem:{kind}"),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail,
            errors,
        };
        let mut resp = (status, Json(problem)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        resp
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Duplicate(UniqueKey::JobName) => {
                Self::Conflict("a job with this name exists already".into())
            }
            StoreError::Duplicate(k) => Self::Conflict(format!("duplicate {k:?}")),
            StoreError::Database(sqlx::Error::PoolTimedOut) => {
                Self::Unavailable("the database is not reachable".into())
            }
            other => Self::Internal(other.into()),
        }
    }
}

impl From<DispatchError> for ApiError {
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::JobNotFound(name) => Self::job_not_found(&name),
            DispatchError::ExecutionNotFound(t) => {
                Self::NotFound(format!("execution `{}` does not exist", truncate(&t)))
            }
            e @ (DispatchError::NotFinished(_)
            | DispatchError::NotRunning(_)
            | DispatchError::AlreadyFinal(_)
            | DispatchError::EarlierJob(_)) => Self::Conflict(e.to_string()),
            e @ DispatchError::Stopping => Self::Unavailable(e.to_string()),
            e @ DispatchError::ExecutorNotLive(..) => Self::Conflict(e.to_string()),
            DispatchError::Store(e) => e.into(),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        // serde's message names the parameter: "failed to deserialize query string: size: …".
        let text = r.body_text();
        let text = text
            .strip_prefix("Failed to deserialize query string: ")
            .unwrap_or(&text);
        match text.split_once(": ") {
            Some((field, msg)) if !field.contains(' ') => Self::field(field, msg),
            _ => Self::BadRequest(format!("invalid query string: {text}")),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        Self::BadRequest(r.body_text())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::PayloadTooLarge
        } else {
            Self::BadRequest(r.body_text())
        }
    }
}
