//! One HTTP attempt against law.go.kr, reduced to an [`Attempt`] that holds no URL.
//!
//! reqwest's errors print the full URL, query string and so the key included: every one
//! is classified here with `without_url()` semantics (kind only) and dropped.

use std::time::{Duration, SystemTime};

use reqwest::header::{ACCEPT, HeaderMap, HeaderValue, REFERER, RETRY_AFTER, USER_AGENT};
use url::Url;

use super::error::{Endpoint, LawError, NetKind};
use super::retry_after::parse_retry_after;
use crate::config::LawApiConfig;
use crate::deadline::Deadline;
use crate::secret::Secret;

/// What one attempt produced.
#[derive(Debug)]
pub(super) enum Attempt {
    /// HTTP 2xx with a body within the limit.
    Body(Vec<u8>),
    /// Any other status; the body is not read.
    Status {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// The connection failed or timed out before a complete reply.
    Network(NetKind),
    /// A failure that retrying will not fix (oversized or empty body).
    Fatal(LawError),
}

/// The HTTP side of the client: a reqwest client with the policy settings baked in.
#[derive(Debug, Clone)]
pub(super) struct Transport {
    http: reqwest::Client,
    base: Url,
    max_body: u64,
}

impl Transport {
    pub(super) fn new(cfg: &LawApiConfig) -> Result<Self, LawError> {
        let header = |v: &str| {
            HeaderValue::from_str(v)
                .map_err(|_| LawError::InvalidRequest("header value is not printable ASCII".into()))
        };
        let mut headers = HeaderMap::new();
        headers.insert(REFERER, header(&cfg.referer)?);
        headers.insert(USER_AGENT, header(&cfg.user_agent)?);
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let http = reqwest::Client::builder()
            // A 302 goes to a maintenance page; following it would spend a second call.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(cfg.connect_timeout)
            .read_timeout(cfg.read_timeout)
            .default_headers(headers)
            .build()
            .map_err(|_| LawError::InvalidRequest("HTTP client could not be built".into()))?;
        // `Url::join` replaces the last path segment unless the base ends in '/'.
        let mut base = cfg.base_url.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        Ok(Self {
            http,
            base,
            max_body: cfg.max_response_bytes,
        })
    }

    pub(super) async fn attempt(
        &self,
        endpoint: Endpoint,
        oc: &Secret,
        params: &[(&'static str, String)],
        deadline: Deadline,
    ) -> Attempt {
        let Ok(mut url) = self.base.join(endpoint.path()) else {
            return Attempt::Fatal(LawError::InvalidRequest(
                "base URL cannot take the DRF path".into(),
            ));
        };
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("OC", oc.expose())
                .append_pair("target", "prec")
                .append_pair("type", "JSON");
            for (k, v) in params {
                q.append_pair(k, v);
            }
        }
        let mut request = self.http.get(url);
        if let Some(left) = deadline.usable() {
            request = request.timeout(left.max(Duration::from_millis(1)));
        }
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return Attempt::Network(net_kind(&e.without_url())),
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            return Attempt::Status { status, retry_after };
        }
        if response.content_length().is_some_and(|n| n > self.max_body) {
            return Attempt::Fatal(LawError::BodyTooLarge { limit: self.max_body });
        }
        let mut body = Vec::with_capacity(response.content_length().unwrap_or(0).min(1 << 20) as usize);
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if (body.len() + chunk.len()) as u64 > self.max_body {
                        return Attempt::Fatal(LawError::BodyTooLarge { limit: self.max_body });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Attempt::Network(net_kind(&e.without_url())),
            }
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Attempt::Fatal(LawError::EmptyBody);
        }
        Attempt::Body(body)
    }
}

fn net_kind(e: &reqwest::Error) -> NetKind {
    if e.is_timeout() {
        NetKind::Timeout
    } else if e.is_connect() {
        NetKind::Connect
    } else {
        NetKind::Other
    }
}
