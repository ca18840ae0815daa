//! Alerts for dead letters: an [`AlertSink`] trait and its Slack incoming-webhook sink.
//!
//! An alert carries the job's type and identity, its retry count, its first failure and
//! its last sanitized error: never the key, never an upstream body. A failing webhook is
//! logged and reported; the dead letter itself is already stored and stays.

use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

use crate::law::BoxFuture;
use crate::policy::{ALERT_TIMEOUT, MAX_ERROR_TEXT};
use crate::queue::ErrorNote;
use crate::secret::Secret;

/// One dead-lettered entry, as an alert describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterAlert {
    /// `KIND:identity`.
    pub id: String,
    pub retry_count: u32,
    /// Epoch ms of the first failure.
    pub first_failed_at_ms: u64,
    pub last_error: Option<ErrorNote>,
}

/// Why an alert was not delivered. Holds no URL: the webhook URL is a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlertError {
    #[error("alert webhook answered HTTP {0}")]
    Status(u16),
    #[error("alert webhook unreachable ({0})")]
    Network(&'static str),
}

/// Where dead-letter alerts go. Implement it for another target (e-mail, SNS, ...).
pub trait AlertSink: Send + Sync + std::fmt::Debug {
    /// Delivers one grouped alert for the entries a drainer pass dead-lettered.
    fn dead_lettered<'a>(
        &'a self,
        env: &'a str,
        alerts: &'a [DeadLetterAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>>;

    /// Delivers the alert of the key-health circuit's opening: law.go.kr refused the key
    /// itself, and no call is made until a probe finds it accepted. By default, logged.
    fn key_refused<'a>(
        &'a self,
        env: &'a str,
        circuit: &'a crate::key_health::OpenCircuit,
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        let (cause, fix) = key_texts(circuit);
        tracing::error!(env, reason = %circuit.reason, cause, fix, "law.go.kr refused the key; the key-health circuit is open (no SLACK_WEBHOOK_URL set)");
        Box::pin(std::future::ready(Ok(())))
    }

    /// Delivers one alert for sync runs whose records show a discrepancy (`totalCnt`
    /// against the ids seen, dead letters, pages never read). By default, logged.
    fn runs_incomplete<'a>(
        &'a self,
        env: &'a str,
        runs: &'a [crate::mirror::runs::RunAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        for r in runs {
            tracing::error!(env, run = %r.run_id, discrepancies = ?r.discrepancies, "sync run recorded with a discrepancy");
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The cause and the fix of a circuit's reason, in words.
fn key_texts(circuit: &crate::key_health::OpenCircuit) -> (&'static str, &'static str) {
    match crate::law::KeyProblem::from_kind(&circuit.reason) {
        Some(p) => (p.cause(), p.fix()),
        None => (
            "law.go.kr refused the key for a reason this release does not name",
            "see `lawsync gate status` and `lawsync probe`",
        ),
    }
}

/// No alert target configured: the dead letters are logged, and kept.
#[derive(Debug, Default)]
pub struct LogAlerts;

impl AlertSink for LogAlerts {
    fn dead_lettered<'a>(
        &'a self,
        env: &'a str,
        alerts: &'a [DeadLetterAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        for a in alerts {
            tracing::error!(env, id = %a.id, retry_count = a.retry_count, "retry entry dead-lettered (no SLACK_WEBHOOK_URL set)");
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Posts to a Slack incoming webhook.
#[derive(Debug)]
pub struct SlackWebhook {
    http: reqwest::Client,
    url: Secret,
    /// Scrubbed from the message (the law.go.kr key), as a last line of defence.
    scrub: Option<Secret>,
}

impl SlackWebhook {
    /// A notifier posting to `url`, scrubbing `scrub` (the law.go.kr key) from every message.
    pub fn new(url: Secret, scrub: Option<Secret>) -> Result<Self, AlertError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(ALERT_TIMEOUT)
            .build()
            .map_err(|_| AlertError::Network("HTTP client could not be built"))?;
        Ok(Self { http, url, scrub })
    }

    /// The Slack message for `alerts`: plain `text`, readable in notifications. Every text
    /// taken from an entry is escaped (`&`, `<`, `>`), so an identity such as `<!channel>`
    /// cannot mention anyone, and cut to a bounded length.
    pub fn message(&self, env: &str, alerts: &[DeadLetterAlert]) -> serde_json::Value {
        let plural = if alerts.len() == 1 { "y" } else { "ies" };
        let mut text = format!(
            "lawsync [{}]: {} retry entr{plural} moved to the dead letters",
            escape(env),
            alerts.len()
        );
        for a in alerts {
            let first = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(a.first_failed_at_ms));
            let last = a
                .last_error
                .as_ref()
                .map_or("no error recorded".to_owned(), |e| escape(&e.message));
            text.push_str(&format!(
                "\n• `{}`: {} failures since {first}; last: {last}",
                escape(&a.id),
                a.retry_count
            ));
        }
        text.push_str("\nInspect with `lawsync queue dead`; retry with `lawsync queue redrive`.");
        if let Some(s) = &self.scrub {
            text = s.scrub(&text);
        }
        serde_json::json!({ "text": text })
    }
}

/// Slack's three control characters, escaped as its docs ask; control characters dropped;
/// at most [`MAX_ERROR_TEXT`] characters.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().filter(|c| !c.is_control()).take(MAX_ERROR_TEXT) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

impl SlackWebhook {
    /// The Slack message for runs recorded with a discrepancy.
    pub fn runs_message(&self, env: &str, runs: &[crate::mirror::runs::RunAlert]) -> serde_json::Value {
        let mut text = format!(
            "lawsync [{}]: {} sync run{} recorded with a discrepancy",
            escape(env),
            runs.len(),
            if runs.len() == 1 { "" } else { "s" }
        );
        for r in runs {
            text.push_str(&format!("\n• `{}`", escape(r.run_id.as_str())));
            for d in &r.discrepancies {
                text.push_str(&format!("\n    {}", escape(d)));
            }
        }
        text.push_str("\nSee `lawsync sync status <run>` and the record under runs/.");
        if let Some(s) = &self.scrub {
            text = s.scrub(&text);
        }
        serde_json::json!({ "text": text })
    }

    async fn post(&self, body: serde_json::Value) -> Result<(), AlertError> {
        let response = self
            .http
            .post(self.url.expose())
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                let e = e.without_url();
                AlertError::Network(if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "could not connect"
                } else {
                    "request failed"
                })
            })?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(AlertError::Status(response.status().as_u16()))
        }
    }
}

impl AlertSink for SlackWebhook {
    fn dead_lettered<'a>(
        &'a self,
        env: &'a str,
        alerts: &'a [DeadLetterAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        Box::pin(self.post(self.message(env, alerts)))
    }

    fn runs_incomplete<'a>(
        &'a self,
        env: &'a str,
        runs: &'a [crate::mirror::runs::RunAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        Box::pin(self.post(self.runs_message(env, runs)))
    }

    fn key_refused<'a>(
        &'a self,
        env: &'a str,
        circuit: &'a crate::key_health::OpenCircuit,
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        Box::pin(self.post(self.key_message(env, circuit)))
    }
}

impl SlackWebhook {
    /// The Slack message of the key-health circuit's opening: the likely cause and the fix.
    pub fn key_message(&self, env: &str, circuit: &crate::key_health::OpenCircuit) -> serde_json::Value {
        let (cause, fix) = key_texts(circuit);
        let since = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(circuit.opened_ms));
        let mut text = format!(
            "lawsync [{}]: law.go.kr refused the key (`{}`), since {since}. No call is made; one probe every {} min closes the circuit once the key is accepted.\nLikely cause: {}\nFix: {}\nSee `lawsync gate status`.",
            escape(env),
            escape(&circuit.reason),
            crate::policy::KEY_PROBE_INTERVAL.as_secs() / 60,
            escape(cause),
            escape(fix),
        );
        if let Some(s) = &self.scrub {
            text = s.scrub(&text);
        }
        serde_json::json!({ "text": text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_text_is_escaped_cut_and_scrubbed() {
        let hook = SlackWebhook::new(
            Secret::new("https://hooks.example/x"),
            Some(Secret::new("KEY123")),
        )
        .expect("hook");
        let alert = DeadLetterAlert {
            id: crate::queue::Job::detail("<!channel>").id(),
            retry_count: 30,
            first_failed_at_ms: 1_764_000_000_000,
            last_error: Some(ErrorNote::now(
                "http_status",
                format!("a & b KEY123 {}", "x".repeat(2000)),
                Some(503),
            )),
        };
        let text = hook.message("prod", &[alert])["text"]
            .as_str()
            .expect("text")
            .to_owned();
        assert!(
            text.contains("&lt;!channel&gt;") && !text.contains("<!channel>"),
            "{text}"
        );
        assert!(text.contains("a &amp; b ***"), "{text}");
        assert!(!text.contains("KEY123"));
        assert!(text.len() < 1200, "cut to a bounded length: {}", text.len());
    }
}
