//! The operations console at `/ui/`: hand-written HTML, CSS and small ES modules compiled into
//! the binary (no build step, no CDN), which call the REST API from the browser.
//!
//! Every file is served with a strong `ETag` and `Cache-Control: no-cache`, so a browser keeps
//! its copy and revalidates it with a 304 (file names carry no content hash, so a longer
//! lifetime would serve old scripts after an upgrade). Compression is the whole server's
//! (tower-http, in [`router`](super::router)). A strict Content-Security-Policy allows only
//! this origin: the console holds an API token in `sessionStorage`.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};
use tower_http::set_header::SetResponseHeaderLayer;

use super::error::ApiError;

/// One embedded file: its name under `/ui/`, its media type and its bytes.
struct Source {
    name: &'static str,
    media_type: &'static str,
    body: &'static [u8],
}

macro_rules! sources {
    ($(($name:literal, $media:literal)),* $(,)?) => {
        &[$(Source { name: $name, media_type: $media, body: include_bytes!(concat!("assets/", $name)) }),*]
    };
}

const SOURCES: &[Source] = sources![
    ("index.html", "text/html; charset=utf-8"),
    ("console.css", "text/css; charset=utf-8"),
    ("app.js", "text/javascript; charset=utf-8"),
    ("api.js", "text/javascript; charset=utf-8"),
    ("dom.js", "text/javascript; charset=utf-8"),
    ("i18n.js", "text/javascript; charset=utf-8"),
    ("session.js", "text/javascript; charset=utf-8"),
    ("cron-words.js", "text/javascript; charset=utf-8"),
    ("overview.js", "text/javascript; charset=utf-8"),
    ("jobs.js", "text/javascript; charset=utf-8"),
    ("job-form.js", "text/javascript; charset=utf-8"),
    ("executions.js", "text/javascript; charset=utf-8"),
    ("cluster.js", "text/javascript; charset=utf-8"),
    ("executors.js", "text/javascript; charset=utf-8"),
    ("tokens.js", "text/javascript; charset=utf-8"),
    ("audit.js", "text/javascript; charset=utf-8"),
    ("favicon.svg", "image/svg+xml"),
];

/// A file ready to serve.
struct Asset {
    source: &'static Source,
    etag: HeaderValue,
}

static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| SOURCES.iter().map(prepare).collect());

fn prepare(source: &'static Source) -> Asset {
    let digest = Sha256::digest(source.body);
    let etag = HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..12])))
        .expect("hex is a valid header value");
    Asset { source, etag }
}

const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     frame-ancestors 'none'; form-action 'self'";

/// `/` and `/ui` lead to the console; `/ui/` and `/ui/{file}` serve it, with the caching and
/// security headers of every console answer.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let files =
        Router::new()
            .route(
                "/ui/",
                get(|headers: HeaderMap| async move { serve("index.html", &headers) }),
            )
            .route(
                "/ui/{file}",
                get(|Path(file): Path<String>, headers: HeaderMap| async move {
                    serve(&file, &headers)
                }),
            )
            .layer(header_layer(header::CACHE_CONTROL, "no-cache"))
            .layer(header_layer(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .layer(header_layer(header::REFERRER_POLICY, "no-referrer"))
            .layer(header_layer(
                header::CONTENT_SECURITY_POLICY,
                CONTENT_SECURITY_POLICY,
            ));
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/ui/") }))
        .route("/ui", get(|| async { Redirect::temporary("/ui/") }))
        .merge(files)
}

fn header_layer(
    name: header::HeaderName,
    value: &'static str,
) -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.source.name == name) else {
        return ApiError::NotFound("no such console file".into()).into_response();
    };
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.source.media_type),
        ),
        (header::ETAG, asset.etag.clone()),
    ];
    if etag_matches(request, &asset.etag) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (headers, asset.source.body).into_response()
}

fn etag_matches(request: &HeaderMap, etag: &HeaderValue) -> bool {
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t.as_bytes() == etag.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), HeaderValue::from_str(v).unwrap()))
            .collect()
    }

    #[test]
    fn etags_match_exactly_weakly_or_by_star() {
        let etag = HeaderValue::from_static("\"abc\"");
        let inm = header::IF_NONE_MATCH;
        assert!(etag_matches(&headers(&[(inm.clone(), "\"abc\"")]), &etag));
        assert!(etag_matches(
            &headers(&[(inm.clone(), "\"x\", W/\"abc\"")]),
            &etag
        ));
        assert!(etag_matches(&headers(&[(inm.clone(), "*")]), &etag));
        assert!(!etag_matches(&headers(&[(inm.clone(), "\"abd\"")]), &etag));
        assert!(!etag_matches(&HeaderMap::new(), &etag));
    }

    #[test]
    fn every_file_is_embedded_and_every_import_resolves() {
        let names: Vec<&str> = SOURCES.iter().map(|s| s.name).collect();
        for s in SOURCES {
            assert!(!s.body.is_empty(), "{} is empty", s.name);
            let text = std::str::from_utf8(s.body).expect("text files are UTF-8");
            // Every `./x.js` a module imports and every file the page links is served.
            for piece in text.split(['"', '\'']) {
                if let Some(file) = piece.strip_prefix("./")
                    && [".js", ".css", ".svg"]
                        .iter()
                        .any(|ext| file.ends_with(ext))
                {
                    assert!(names.contains(&file), "{} refers to missing {file}", s.name);
                }
            }
        }
    }
}
