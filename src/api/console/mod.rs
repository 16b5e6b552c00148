//! The operations console at `/ui/`: hand-written HTML, CSS and small ES modules compiled into
//! the binary (no build step, no CDN), which call the REST API from the browser.
//!
//! Every file is served with a strong `ETag` and `Cache-Control: no-cache`, so a browser keeps
//! its copy and revalidates it with a 304 (file names carry no content hash, so a longer
//! lifetime would serve old scripts after an upgrade). Text files are gzipped once, on first
//! use, for clients that accept it. A strict Content-Security-Policy allows only this origin:
//! the console holds an API token in `sessionStorage`.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

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
    ("favicon.svg", "image/svg+xml"),
];

/// A file ready to serve.
struct Asset {
    source: &'static Source,
    etag: HeaderValue,
    /// The gzip encoding, when it is smaller.
    gzip: Option<Vec<u8>>,
}

static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| SOURCES.iter().map(prepare).collect());

fn prepare(source: &'static Source) -> Asset {
    use std::io::Write;
    let digest = Sha256::digest(source.body);
    let etag = HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..12])))
        .expect("hex is a valid header value");
    let gzip = (source.media_type.starts_with("text/") || source.media_type.contains("svg"))
        .then(|| {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            enc.write_all(source.body).ok()?;
            enc.finish().ok()
        })
        .flatten()
        .filter(|gz| gz.len() < source.body.len());
    Asset { source, etag, gzip }
}

const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     frame-ancestors 'none'; form-action 'self'";

/// `/` and `/ui` lead to the console; `/ui/` and `/ui/{file}` serve it.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/ui/") }))
        .route("/ui", get(|| async { Redirect::temporary("/ui/") }))
        .route("/ui/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/ui/{file}",
            get(|Path(file): Path<String>, headers: HeaderMap| async move {
                serve(&file, &headers)
            }),
        )
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.source.name == name) else {
        return ApiError::NotFound("no such console file".into()).into_response();
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.source.media_type),
    );
    headers.insert(header::ETAG, asset.etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    if etag_matches(request, &asset.etag) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    match &asset.gzip {
        Some(gz) if accepts_gzip(request) => {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            (headers, gz.clone()).into_response()
        }
        _ => (headers, asset.source.body).into_response(),
    }
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

/// `Accept-Encoding` names gzip without refusing it (`gzip;q=0`).
fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
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
    fn gzip_negotiation() {
        let ae = header::ACCEPT_ENCODING;
        assert!(accepts_gzip(&headers(&[(ae.clone(), "gzip, deflate, br")])));
        assert!(accepts_gzip(&headers(&[(
            ae.clone(),
            "br;q=1.0, GZIP;q=0.5"
        )])));
        assert!(accepts_gzip(&headers(&[(ae.clone(), "*")])));
        assert!(!accepts_gzip(&headers(&[(ae.clone(), "gzip;q=0, br")])));
        assert!(!accepts_gzip(&headers(&[(ae.clone(), "identity")])));
        assert!(!accepts_gzip(&HeaderMap::new()));
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
        let gzipped = ASSETS.iter().filter(|a| a.gzip.is_some()).count();
        assert!(
            gzipped >= SOURCES.len() - 1,
            "text files are served gzipped"
        );
    }
}
