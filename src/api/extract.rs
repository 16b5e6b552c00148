//! Extractors that turn request parts into typed input or a problem+json rejection.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body. Malformed JSON is a 400 that says where; a JSON value of the wrong shape is a
/// 400 naming the field (`shardCount`, `jobParams.x`); bodies over the limit are 413.
pub struct ValidJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        // The body is read (within the limit) before any rejection, so the connection stays
        // usable for the client's next request.
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state).await?;
        parse_json(&parts.headers, &bytes).map(Self)
    }
}

/// A request body as bytes, read within the limit, for handlers that check a signature over
/// the exact bytes before parsing them; over the limit is a problem+json 413 like every other
/// body (axum's own `Bytes` rejection is plain text).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        Ok(Self(Bytes::from_request(req, state).await?))
    }
}

/// Parses a JSON request body with field-naming errors (see [`ValidJson`]).
pub fn parse_json<T: DeserializeOwned>(
    headers: &axum::http::HeaderMap,
    bytes: &[u8],
) -> Result<T, ApiError> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        })
        .unwrap_or(false);
    if !is_json {
        return Err(ApiError::UnsupportedMediaType(
            "expected Content-Type: application/json".into(),
        ));
    }
    // serde also reads a struct from an array, field by field in order; every body of this API
    // is an object (or `null` where it is optional), as the OpenAPI document says.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(ApiError::BadRequest(
            "invalid JSON body: expected an object, found an array".into(),
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    with_field_errors(serde_path_to_error::deserialize(de))
}

/// Reads a JSON document built by the API (a job's definition with a merge patch applied) as
/// `T`, with the same field-naming errors as a request body.
pub fn from_document<T: DeserializeOwned>(doc: serde_json::Value) -> Result<T, ApiError> {
    with_field_errors(serde_path_to_error::deserialize(doc))
}

fn with_field_errors<T>(
    read: Result<T, serde_path_to_error::Error<serde_json::Error>>,
) -> Result<T, ApiError> {
    match read {
        Ok(v) => Ok(v),
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_data() && path != "." {
                Err(ApiError::field(&path, inner.to_string()))
            } else if inner.is_data() {
                // serde names a missing field in its message: "missing field `cron`".
                let msg = inner.to_string();
                match msg.split('`').nth(1).filter(|_| {
                    msg.starts_with("missing field") || msg.starts_with("unknown field")
                }) {
                    Some(field) => Err(ApiError::field(
                        field,
                        msg.split(" at line").next().unwrap_or(&msg).to_string(),
                    )),
                    None => Err(ApiError::BadRequest(format!("invalid JSON body: {msg}"))),
                }
            } else {
                Err(ApiError::BadRequest(format!(
                    "malformed JSON body: {inner}"
                )))
            }
        }
    }
}

/// Query parameters with problem+json rejections.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let axum::extract::Query(v) =
            axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(Self(v))
    }
}

/// Path parameters with problem+json rejections.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let axum::extract::Path(v) =
            axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(Self(v))
    }
}
