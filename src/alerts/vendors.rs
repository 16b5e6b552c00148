//! What each channel kind sends, and how it is signed:
//! - `webhook`: the JSON body of docs/production.md, "Alerts"; with a secret,
//!   `X-JobFlow-Timestamp` (unix seconds) and `X-JobFlow-Signature: v1=<hex HMAC-SHA256(secret,
//!   timestamp + "." + body)>`.
//! - `dingtalk`: custom robot markdown message; with a secret ("加签"), the query parameters
//!   `timestamp` (unix milliseconds) and `sign` = URL-encoded
//!   base64(HMAC-SHA256(key = secret, message = timestamp + "\n" + secret)). Answers
//!   `{"errcode": 0}` on success.
//! - `wecom`: group robot markdown message, no signing (the key is in the URL). Answers
//!   `{"errcode": 0}`.
//! - `feishu`: custom bot text message; with a secret, `timestamp` (unix seconds, a string) and
//!   `sign` = base64(HMAC-SHA256(key = timestamp + "\n" + secret, message = empty)) in the
//!   body. Answers `{"code": 0}`.
//! - `slack`: incoming webhook `{"text": …}`, no signing (the URL is the secret).

use base64::Engine as _;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::{Alert, ChannelKind};

/// One HTTP request to a channel.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub url: reqwest::Url,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// `v1=<hex>` of the generic webhook, over the exact body bytes sent.
pub fn webhook_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    format!(
        "v1={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &message))
    )
}

/// DingTalk's `sign` before URL encoding.
pub fn dingtalk_sign(secret: &str, timestamp_ms: i64) -> String {
    let message = format!("{timestamp_ms}\n{secret}");
    base64::engine::general_purpose::STANDARD
        .encode(hmac_sha256(secret.as_bytes(), message.as_bytes()))
}

/// Feishu's `sign`: the string to sign is the key, the message is empty.
pub fn feishu_sign(secret: &str, timestamp_s: i64) -> String {
    let key = format!("{timestamp_s}\n{secret}");
    base64::engine::general_purpose::STANDARD.encode(hmac_sha256(key.as_bytes(), b""))
}

/// The message for the chat channels: a title line and the facts, one per line.
pub fn text(alert: &Alert, suppressed: u64) -> (String, Vec<(&'static str, String)>) {
    let title = format!(
        "JobFlow {}: {}",
        alert.event.as_str(),
        alert.job_name.as_str()
    );
    let mut facts: Vec<(&'static str, String)> = Vec::new();
    let mut fact = |k: &'static str, v: Option<String>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            facts.push((k, v));
        }
    };
    fact("Job", Some(alert.job_name.clone()));
    fact("Status", alert.status.map(|s| s.as_str().to_string()));
    fact("Fire time", Some(alert.fire_time.to_rfc3339()));
    fact("Retry", alert.retry_count.map(|r| r.to_string()));
    fact("Error", alert.error_message.as_deref().map(excerpt));
    fact("Trace id", alert.trace_id.clone());
    fact("Execution id", alert.execution_id.clone());
    fact("Scheduler", alert.scheduler_instance.clone());
    fact("Executor", alert.executor_instance.clone());
    fact("Occurred at", Some(alert.occurred_at.to_rfc3339()));
    if suppressed > 0 {
        fact(
            "Suppressed",
            Some(format!(
                "{suppressed} similar alert(s) since the previous one"
            )),
        );
    }
    (title, facts)
}

fn excerpt(s: &str) -> String {
    const MAX: usize = 500;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

fn plain(alert: &Alert, suppressed: u64) -> String {
    let (title, facts) = text(alert, suppressed);
    let mut out = title;
    for (k, v) in facts {
        out.push_str(&format!("\n{k}: {v}"));
    }
    out
}

fn markdown(alert: &Alert, suppressed: u64) -> (String, String) {
    let (title, facts) = text(alert, suppressed);
    let mut out = format!("### {title}");
    for (k, v) in facts {
        out.push_str(&format!("\n\n**{k}**: {v}"));
    }
    (title, out)
}

/// The request a channel of `kind` at `url` receives for `alert`, signed as of `now`.
pub fn render(
    kind: ChannelKind,
    url: &reqwest::Url,
    secret: Option<&str>,
    alert: &Alert,
    suppressed: u64,
    now: DateTime<Utc>,
) -> Outgoing {
    let mut url = url.clone();
    let mut headers = vec![("content-type", "application/json".to_string())];
    let body: Value = match kind {
        ChannelKind::Webhook => {
            let body = serde_json::to_vec(alert).expect("an alert serialises");
            if let Some(secret) = secret {
                let ts = now.timestamp();
                headers.push(("x-jobflow-timestamp", ts.to_string()));
                headers.push(("x-jobflow-signature", webhook_signature(secret, ts, &body)));
            }
            return Outgoing { url, headers, body };
        }
        ChannelKind::Dingtalk => {
            if let Some(secret) = secret {
                let ts = now.timestamp_millis();
                url.query_pairs_mut()
                    .append_pair("timestamp", &ts.to_string())
                    .append_pair("sign", &dingtalk_sign(secret, ts));
            }
            let (title, text) = markdown(alert, suppressed);
            json!({"msgtype": "markdown", "markdown": {"title": title, "text": text}})
        }
        ChannelKind::Wecom => {
            let (_, text) = markdown(alert, suppressed);
            json!({"msgtype": "markdown", "markdown": {"content": text}})
        }
        ChannelKind::Feishu => {
            let mut body =
                json!({"msg_type": "text", "content": {"text": plain(alert, suppressed)}});
            if let Some(secret) = secret {
                let ts = now.timestamp();
                body["timestamp"] = json!(ts.to_string());
                body["sign"] = json!(feishu_sign(secret, ts));
            }
            body
        }
        ChannelKind::Slack => json!({"text": plain(alert, suppressed)}),
    };
    Outgoing {
        url,
        headers,
        body: body.to_string().into_bytes(),
    }
}

/// Whether the channel accepted the message: a 2xx, and for the robots whose errors come
/// back as 200, a zero error code.
pub fn accepted(kind: ChannelKind, status: u16, body: &[u8]) -> Result<(), String> {
    if !(200..300).contains(&status) {
        return Err(format!("HTTP {status}"));
    }
    let code_field = match kind {
        ChannelKind::Dingtalk | ChannelKind::Wecom => "errcode",
        ChannelKind::Feishu => "code",
        ChannelKind::Webhook | ChannelKind::Slack => return Ok(()),
    };
    let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match answer.get(code_field).and_then(Value::as_i64) {
        None | Some(0) => Ok(()),
        Some(code) => {
            let msg = ["errmsg", "msg"]
                .iter()
                .find_map(|k| answer.get(*k).and_then(Value::as_str))
                .unwrap_or("");
            Err(format!("{code_field} {code}: {}", excerpt(msg)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn robot_answers_are_checked() {
        assert!(
            accepted(
                ChannelKind::Dingtalk,
                200,
                br#"{"errcode":0,"errmsg":"ok"}"#
            )
            .is_ok()
        );
        let e = accepted(
            ChannelKind::Dingtalk,
            200,
            br#"{"errcode":310000,"errmsg":"sign not match"}"#,
        )
        .unwrap_err();
        assert_eq!(e, "errcode 310000: sign not match");
        assert!(
            accepted(
                ChannelKind::Feishu,
                200,
                br#"{"code":19021,"msg":"sign match fail"}"#
            )
            .is_err()
        );
        assert!(accepted(ChannelKind::Feishu, 200, br#"{"code":0}"#).is_ok());
        assert!(accepted(ChannelKind::Slack, 200, b"ok").is_ok());
        assert_eq!(
            accepted(ChannelKind::Webhook, 503, b"").unwrap_err(),
            "HTTP 503"
        );
    }
}
