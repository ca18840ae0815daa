//! The law.go.kr DRF client: every call through the gate, retried only where it helps.
//!
//! Per attempt: wait for a gate slot → one GET → classify. 429, 5xx and network failures
//! back off `max(2^attempt s, Retry-After)` plus upward jitter; a 429 also sets the
//! cluster-wide cooldown, so every instance backs off, not just this one. A wait longer
//! than the bound is not slept but returned as [`LawError::TryLater`], for the retry queue.
//! 3xx and 4xx fail at once. Nothing of the URL (which holds the key) or of the reply
//! body reaches an error, a log line or a span.
//!
//! A reply is read in the format asked for (`LAW_API_FORMAT`, see [`format`]), JSON or XML,
//! into the same types. A refusal of the key itself ([`refusals`]) opens the key-health
//! circuit ([`crate::key_health`]) and holds the whole cluster off; a reply of no known
//! shape is kept, key masked, for `lawsync probe`, and an HTML one also holds the cluster
//! off for [`crate::policy::UNKNOWN_PAGE_COOLDOWN`]. A connection reset after the request
//! was sent (a throttle that answers with no status) cools the cluster down as a 429
//! without Retry-After would.

pub mod calendar;
mod error;
pub mod format;
mod http;
pub(crate) mod model;
pub mod refusals;
mod retry_after;
pub mod schedule;
pub mod xml;

pub use error::{BoxFuture, Disposition, Endpoint, FailureRecord, FailureSink, LawError, NetKind};
pub use format::{Format, FormatSetting};
pub use model::{
    PrecedentDetail, PrecedentSummary, Probe, SearchPage, SearchRequest, check_date, check_precedent_id,
    decode_body, parse_detail, parse_search,
};
pub use refusals::{KeyProblem, TlsProblem};
pub use retry_after::parse_retry_after;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rand::Rng;
use tracing::Instrument;

use crate::config::GateConfig;
use crate::config::LawApiConfig;
use crate::deadline::Deadline;
use crate::gate::{Gate, GateError, Grant};
use crate::key_health::{KeyHealth, UnknownReply};
use crate::policy::{
    BACKOFF_BASE, BACKOFF_JITTER_FRACTION, GATE_REFUSED_RETRY, KEY_HEALTH_KEEP, KEY_PROBE_INTERVAL,
    MAX_STALE_GRANTS, MIN_CALL_WINDOW, RETRY_AFTER_CAP, UNKNOWN_PAGE_COOLDOWN,
};
use crate::secret::Secret;
use http::{Attempt, Connection, Transport};

/// The upstream name used in Redis keys and metrics.
pub const UPSTREAM: &str = "law-go-kr";

/// A law.go.kr client. Build once per process (cold start) and share.
#[derive(Debug, Clone)]
pub struct LawClient {
    transport: Transport,
    oc: Secret,
    gate: Arc<Gate>,
    max_attempts: u32,
    history: Option<Arc<dyn FailureSink>>,
    observer: Option<Arc<dyn CallObserver>>,
    /// Longest wait for a gate slot per call; `None` is the gate's own `max_wait`.
    gate_wait: Option<Duration>,
    /// The key-health circuit and its records, beside the gate.
    health: KeyHealth,
    /// `LAW_API_FORMAT`.
    setting: FormatSetting,
    /// How long the cluster holds off after a refusal of the key before a probe
    /// ([`KEY_PROBE_INTERVAL`]; shorter in tests).
    key_probe: Duration,
    /// How long, at most, a call of this client takes to be answered, as the gate holds
    /// other callers behind a probe ([`crate::policy::key_probe_window`] of the timeouts).
    probe_window: Duration,
    /// Whether refusals open the key-health circuit (and answers close it): false for
    /// `lawsync probe`, which reports what it sees and steers nothing.
    steers_health: bool,
    /// The format served, as this process knows it; shared by clones.
    served: Arc<Served>,
}

/// What a client (and its clones) learned of the key's service, per endpoint (search,
/// detail: law.go.kr grants each API, and each format of it, apart).
#[derive(Debug, Default)]
struct Served {
    /// With `auto`: the format last found served (0 JSON, 1 XML).
    format: [std::sync::atomic::AtomicU8; 2],
    /// With `auto`: the formats learned by any instance have been read from Redis.
    loaded: tokio::sync::OnceCell<()>,
    /// The last cooldown end (µs) after which this process looked whether the circuit was
    /// open, so that one look serves every call after one cooldown.
    checked_cooldown: [std::sync::atomic::AtomicU64; 2],
}

/// An endpoint's place in [`Served`]'s arrays.
fn slot(endpoint: Endpoint) -> usize {
    match endpoint {
        Endpoint::Search => 0,
        Endpoint::Detail => 1,
    }
}

/// A 200 body and when the gate granted its call.
struct Answer {
    body: Vec<u8>,
    granted_at_us: u64,
    cooldown_end_us: u64,
    /// The call was the key-health circuit's probe.
    probe: bool,
}

/// One attempt at law.go.kr, as a [`CallObserver`] sees it: no URL, no key, no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallEvent {
    pub endpoint: Endpoint,
    /// 1-based attempt of this call.
    pub attempt: u32,
    /// When the request was sent (after the gate).
    pub started_at: SystemTime,
    /// Time spent waiting for the gate's slot.
    pub waited: Duration,
    /// The HTTP status; `None` when no reply arrived (a network failure or timeout).
    pub status: Option<u16>,
    /// From sending to the status (and, for a 200, the whole body).
    pub took: Duration,
    /// The cluster-wide cooldown this attempt set (after a 429).
    pub cooldown: Option<Duration>,
    /// From the grant to the request being handed to the transport, at most (measured from
    /// asking for it, see [`crate::gate::Grant::asked_at`]): never more than the gate's
    /// `grant_validity` (`LAW_API_GRANT_VALIDITY_MS`; a staler grant is given back).
    pub grant_to_send: Duration,
    /// Grants given back unsent before this one, for being stale.
    pub given_back: u32,
    /// When the gate granted this start, µs on Redis' clock.
    pub granted_at_us: u64,
    /// The request went on a connection opened for it (before the grant), not a pooled one.
    pub new_connection: bool,
}

/// Sees every attempt the client makes: for metrics, timelines and the local runtime.
/// Called inline, so it must be quick and must not block.
pub trait CallObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, event: &CallEvent);

    /// law.go.kr refused the key (`opened`: this refusal opened the circuit).
    fn key_refused(&self, problem: &KeyProblem, opened: bool) {
        let _ = (problem, opened);
    }

    /// A reply of no known shape was kept for `lawsync probe`.
    fn unknown_reply(&self) {}
}

impl LawClient {
    /// A client with the key already resolved (from the environment or Secrets Manager).
    pub fn new(cfg: &LawApiConfig, oc: Secret, gate: Arc<Gate>) -> Result<Self, LawError> {
        if oc.is_empty() {
            return Err(LawError::InvalidRequest(
                "the law.go.kr key (LAW_API_OC) is empty".into(),
            ));
        }
        let served = Served::default();
        for f in &served.format {
            f.store(
                format_code(cfg.format.first()),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        Ok(Self {
            transport: Transport::new(cfg)?,
            health: KeyHealth::beside(gate.connection().clone(), gate.key()),
            oc,
            gate,
            max_attempts: cfg.max_attempts.max(1),
            history: None,
            observer: None,
            gate_wait: None,
            setting: cfg.format,
            key_probe: KEY_PROBE_INTERVAL,
            probe_window: crate::policy::key_probe_window(cfg.connect_timeout, cfg.read_timeout),
            steers_health: true,
            served: Arc::new(served),
        })
    }

    /// The same client, reporting refusals of the key without opening the circuit, holding
    /// the cluster off or learning the format: for `lawsync probe`, which may run from
    /// another address than the functions'.
    pub fn observing_only(mut self) -> Self {
        self.steers_health = false;
        self
    }

    /// Whether law.go.kr serves this key the list API in `format`: one `display=1` search
    /// of the whole list, asked in that format whatever `LAW_API_FORMAT` says. Its
    /// refusals are returned, never acted on (see [`LawClient::observing_only`]).
    pub async fn served_in(&self, format: Format, deadline: Deadline) -> Result<(), LawError> {
        let req = SearchRequest {
            all: true,
            display: Some(1),
            ..Default::default()
        };
        let params = req.params()?;
        let answer = self.call(Endpoint::Search, format, &params, deadline).await?;
        decode_body(&answer.body, &self.oc, "PrecSearch").map(|_| ())
    }

    /// Holds the cluster off for `d` after a refusal of the key, instead of
    /// [`KEY_PROBE_INTERVAL`]: for tests and benchmarks that cannot wait minutes.
    pub fn with_key_probe_interval(mut self, d: Duration) -> Self {
        self.key_probe = d;
        self
    }

    /// How long the cluster holds off after a refusal of the key before a probe.
    pub fn key_probe_interval(&self) -> Duration {
        self.key_probe
    }

    /// Reports every attempt to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The same client on another gate (the local runtime's per-instance contrast mode),
    /// with that gate's key-health circuit.
    pub fn with_gate(mut self, gate: Arc<Gate>) -> Self {
        self.health = KeyHealth::beside(gate.connection().clone(), gate.key());
        self.gate = gate;
        self
    }

    /// The key-health circuit and its records.
    pub fn health(&self) -> &KeyHealth {
        &self.health
    }

    /// The format this client asks `endpoint` in next (with `auto`, the last one found
    /// served).
    pub async fn format(&self, endpoint: Endpoint) -> Format {
        if self.setting == FormatSetting::Auto {
            self.served
                .loaded
                .get_or_init(|| async {
                    for e in [Endpoint::Search, Endpoint::Detail] {
                        match self.health.learned_format(e).await {
                            Ok(Some(f)) => self.set_served(e, f),
                            Ok(None) => {}
                            Err(err) => tracing::warn!(error = %err, "law.go.kr: the format the key is served in could not be read; asking in JSON"),
                        }
                    }
                })
                .await;
        }
        match self.setting {
            FormatSetting::Only(f) => f,
            FormatSetting::Auto => {
                match self.served.format[slot(endpoint)].load(std::sync::atomic::Ordering::Relaxed) {
                    1 => Format::Xml,
                    _ => Format::Json,
                }
            }
        }
    }

    fn set_served(&self, endpoint: Endpoint, format: Format) {
        self.served.format[slot(endpoint)].store(format_code(format), std::sync::atomic::Ordering::Relaxed);
    }

    /// Waits at most `max` for a gate slot on each call instead of the gate's `max_wait`;
    /// a slot further away fails the call with [`GateError::WaitTooLong`] before anything
    /// is reserved. The SQS handlers use one interval, so that at most one environment
    /// sleeps on the gate while another calls, and hand the rest to the retry queue.
    pub fn with_gate_wait(mut self, max: Duration) -> Self {
        self.gate_wait = Some(max);
        self
    }

    /// Sends a sanitized record of every failed call to `sink`.
    pub fn with_history(mut self, sink: Arc<dyn FailureSink>) -> Self {
        self.history = Some(sink);
        self
    }

    /// The key, for scrubbing it from texts that leave the process (alerts).
    pub fn key(&self) -> &Secret {
        &self.oc
    }

    /// The gate this client waits on.
    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// One page of `lawSearch.do` for `req`.
    pub async fn search(&self, req: &SearchRequest, deadline: Deadline) -> Result<SearchPage, LawError> {
        let result = async {
            let params = req.params()?;
            parse_search(
                self.fetch(Endpoint::Search, &params, "PrecSearch", deadline)
                    .await?,
            )
        }
        .await;
        self.note(Endpoint::Search, result).await
    }

    /// [`LawClient::search`], with the `PrecSearch` object as law.go.kr sent it (links
    /// removed, the key scrubbed): how its fields were shaped, for `lawsync probe`.
    pub async fn search_as_sent(
        &self,
        req: &SearchRequest,
        deadline: Deadline,
    ) -> Result<(SearchPage, serde_json::Value), LawError> {
        let result = async {
            let params = req.params()?;
            let value = self
                .fetch(Endpoint::Search, &params, "PrecSearch", deadline)
                .await?;
            let raw = value.get("PrecSearch").cloned().unwrap_or_default();
            parse_search(value).map(|p| (p, raw))
        }
        .await;
        self.note(Endpoint::Search, result).await
    }

    /// The full record of precedent `id` (`판례일련번호`) from `lawService.do`.
    pub async fn detail(&self, id: &str, deadline: Deadline) -> Result<PrecedentDetail, LawError> {
        self.detail_as_sent(id, deadline).await.map(|(d, _)| d)
    }

    /// [`LawClient::detail`], with the `PrecService` object as law.go.kr sent it (links
    /// removed, the key scrubbed): what the mirror stores.
    pub async fn detail_as_sent(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<(PrecedentDetail, serde_json::Map<String, serde_json::Value>), LawError> {
        let result = async {
            check_precedent_id(id)?;
            let value = self
                .fetch(
                    Endpoint::Detail,
                    &[("ID", id.to_owned())],
                    "PrecService",
                    deadline,
                )
                .await?;
            let raw = match value.get("PrecService") {
                Some(serde_json::Value::Object(m)) => m.clone(),
                _ => serde_json::Map::new(),
            };
            parse_detail(value).map(|d| (d, raw))
        }
        .await;
        self.note(Endpoint::Detail, result).await
    }

    /// One call in the format the key is served in, decoded, with what its reply tells of the
    /// key's health acted on (see the module docs): the value of a reply of shape `root`.
    async fn fetch(
        &self,
        endpoint: Endpoint,
        params: &[(&'static str, String)],
        root: &str,
        deadline: Deadline,
    ) -> Result<serde_json::Value, LawError> {
        let mut format = self.format(endpoint).await;
        let mut switched = false;
        loop {
            let answer = match self.call(endpoint, format, params, deadline).await {
                Ok(a) => a,
                Err(LawError::KeyRefused(p)) => return Err(self.refused(p, endpoint).await),
                Err(e) => return Err(e),
            };
            match decode_body(&answer.body, &self.oc, root) {
                Ok(v) => {
                    self.answered(&answer, endpoint, format, switched).await;
                    return Ok(v);
                }
                Err(LawError::NotFound) => {
                    self.answered(&answer, endpoint, format, switched).await;
                    return Err(LawError::NotFound);
                }
                Err(LawError::KeyRefused(KeyProblem::NotApplied { .. }))
                    if self.setting == FormatSetting::Auto && !switched =>
                {
                    tracing::warn!(
                        endpoint = endpoint.name(),
                        refused = format.name(),
                        asking = format.other().name(),
                        "law.go.kr: this key is not served this API in one format; asking in the other"
                    );
                    switched = true;
                    format = format.other();
                    // The probe's answer was about one format: the other may probe at once.
                    if answer.probe {
                        self.probe_over(answer.granted_at_us).await;
                    }
                }
                Err(LawError::KeyRefused(p)) => {
                    let p = match p {
                        KeyProblem::NotApplied { .. } => KeyProblem::NotApplied {
                            format: (!switched).then_some(format),
                        },
                        other => other,
                    };
                    return Err(self.refused(p, endpoint).await);
                }
                Err(e @ (LawError::HtmlPage | LawError::Malformed { .. })) => {
                    self.unrecognized(endpoint, format, &answer.body, &e).await;
                    if answer.probe {
                        self.probe_over(answer.granted_at_us).await;
                    }
                    return Err(e);
                }
                Err(e) => {
                    if answer.probe {
                        self.probe_over(answer.granted_at_us).await;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// `grant`'s call, if it was the probe, brought no answer about the key (no reply, a
    /// status other than 200): see [`LawClient::probe_over`].
    async fn probe_unanswered(&self, grant: &Grant) {
        if grant.probe {
            self.probe_over(grant.granted_at_us).await;
        }
    }

    /// The probe granted at `granted_at_us` ended with no answer about the key (no reply,
    /// a 5xx or 429, a reply of no known shape, a refusal of one format): the next call may
    /// probe at once instead of waiting out its window.
    async fn probe_over(&self, granted_at_us: u64) {
        if let Err(e) = self.health.probe_over(granted_at_us).await {
            // The window ends it anyway.
            tracing::warn!(error = %e, "key health: could not end the probe; the next waits for its window");
        }
    }

    /// law.go.kr refused the key on a call to `endpoint`: the circuit opens (or counts one
    /// more refusal) and the whole cluster holds off for the probe interval, in one step.
    /// Returns the error to fail with.
    async fn refused(&self, problem: KeyProblem, endpoint: Endpoint) -> LawError {
        if !self.steers_health {
            return LawError::KeyRefused(problem);
        }
        let opened = match self
            .health
            .refused(&problem, endpoint, &self.gate, self.key_probe)
            .await
        {
            Ok(r) => r.opened,
            Err(e) => {
                // No circuit and no hold: Redis is down, and without it no call is made.
                tracing::warn!(error = %e, "key health: the refusal could not be recorded");
                false
            }
        };
        if opened {
            tracing::error!(
                kind = problem.kind(),
                cause = problem.cause(),
                fix = problem.fix(),
                probe_in_s = self.key_probe.as_secs(),
                "key-health circuit opened: law.go.kr refused the key; no calls until a probe finds it accepted"
            );
        } else {
            tracing::warn!(
                kind = problem.kind(),
                probe_in_s = self.key_probe.as_secs(),
                "key-health circuit: law.go.kr still refuses the key"
            );
        }
        if let Some(o) = &self.observer {
            o.key_refused(&problem, opened);
        }
        LawError::KeyRefused(problem)
    }

    /// law.go.kr answered a call to `endpoint` (a reply or a missing precedent): the format
    /// is kept when it was learned, and the circuit closed if this call was its probe, or is
    /// the first after a hold that this process has not looked past yet.
    async fn answered(&self, answer: &Answer, endpoint: Endpoint, format: Format, switched: bool) {
        if !self.steers_health {
            return;
        }
        if switched {
            self.set_served(endpoint, format);
            if let Err(e) = self.health.learn_format(endpoint, format).await {
                tracing::warn!(error = %e, "law.go.kr: the format the key is served in could not be kept");
            }
            tracing::info!(
                endpoint = endpoint.name(),
                format = format.name(),
                "law.go.kr: this key is served in this format; asking in it from now on"
            );
        }
        let cooldown = answer.cooldown_end_us;
        let checked = &self.served.checked_cooldown[slot(endpoint)];
        let soon_after = answer.granted_at_us.saturating_sub(cooldown) <= KEY_HEALTH_KEEP.as_micros() as u64;
        let looked =
            cooldown == 0 || !soon_after || checked.load(std::sync::atomic::Ordering::Relaxed) >= cooldown;
        if looked && !answer.probe {
            return;
        }
        match self.health.accepted(endpoint, answer.granted_at_us).await {
            Ok(crate::key_health::Accepted::Closed(open)) => {
                tracing::info!(
                    kind = %open.reason,
                    refusals = open.refusals,
                    open_s = answer.granted_at_us.saturating_sub(open.opened_ms * 1000) / 1_000_000,
                    "key-health circuit closed: law.go.kr accepts the key again"
                );
                if open.alert_owed {
                    tracing::warn!(
                        kind = %open.reason,
                        "key-health circuit closed before its alert was delivered; no alert is sent for it"
                    );
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "key health: could not look whether the circuit is open");
                return;
            }
        }
        checked.fetch_max(cooldown, std::sync::atomic::Ordering::Relaxed);
    }

    /// A 200 of no known shape: kept for `lawsync probe`, key masked; a page holds the
    /// cluster off for [`UNKNOWN_PAGE_COOLDOWN`].
    async fn unrecognized(&self, endpoint: Endpoint, format: Format, body: &[u8], e: &LawError) {
        let why = match e {
            LawError::HtmlPage => "an HTML page of no known shape".to_owned(),
            other => other.to_string(),
        };
        let reply = UnknownReply::of(endpoint.name(), format, body, &why, &self.oc);
        if let Err(err) = self.health.keep_unknown(&reply).await {
            tracing::warn!(error = %err, "law.go.kr: a reply of no known shape could not be kept");
        }
        if let Some(o) = &self.observer {
            o.unknown_reply();
        }
        if matches!(e, LawError::HtmlPage) && self.steers_health {
            match self.gate.defer(UNKNOWN_PAGE_COOLDOWN).await {
                Ok(_) => tracing::warn!(
                    cooldown_s = UNKNOWN_PAGE_COOLDOWN.as_secs(),
                    "law.go.kr: an HTML page of no known shape; the cluster holds off (see lawsync probe)"
                ),
                Err(err) => tracing::warn!(error = %err, "law.go.kr: the cluster could not be held off"),
            }
        }
    }

    async fn note<T>(&self, endpoint: Endpoint, result: Result<T, LawError>) -> Result<T, LawError> {
        if let Err(e) = &result {
            tracing::warn!(endpoint = endpoint.name(), kind = e.kind(), status = e.status(), attempts = e.attempts(), error = %e, "law.go.kr call failed");
            if let Some(sink) = &self.history {
                sink.record(e.record(endpoint)).await;
            }
        }
        result
    }

    /// A grant young enough to send on: one that is older than the gate's `grant_validity`
    /// (by default [`crate::policy::grant_validity`]) by the time it could be used (the process was
    /// descheduled, or paused) is given back and asked for again, so a late send never
    /// lands next to the following on-time one. Returns the grant and how many were given
    /// back before it; the wait bound counts from the first ask.
    async fn fresh_grant(
        &self,
        deadline: Deadline,
        bound: Duration,
        endpoint: Endpoint,
    ) -> Result<(Grant, u32), GateError> {
        let validity = self.gate.config().grant_validity;
        let asked = Instant::now();
        let until = deadline.earlier_by(MIN_CALL_WINDOW);
        // A client that steers the circuit may probe it; `lawsync probe` only looks.
        let probe = self.steers_health.then_some(crate::gate::Probe {
            endpoint: endpoint.name(),
            window: self.probe_window,
        });
        let mut grant = match probe {
            Some(p) => self.gate.acquire_probing(until, bound, p).await?,
            None => self.gate.acquire_within(until, bound).await?,
        };
        let mut given_back = 0;
        loop {
            if grant.age() <= validity {
                return Ok((grant, given_back));
            }
            self.gate.give_back(&grant).await?;
            given_back += 1;
            if given_back >= MAX_STALE_GRANTS {
                // The process cannot send on time: better parked than late.
                return Err(GateError::Unsettled {
                    calls: grant.round_trips,
                    reslotted: given_back,
                });
            }
            tracing::debug!(
                given_back,
                "rate gate: grant went stale before it could be sent; given back"
            );
            // The same slot again, taken at once if nobody started since.
            let left = bound.saturating_sub(asked.elapsed());
            grant = self.gate.acquire_again(&grant, until, left, probe).await?;
        }
    }

    /// A ready connection and a fresh grant to send on it. The connection comes first, so
    /// a grant is followed by one write, never a handshake (see `http`), and one that
    /// cannot be opened costs no grant. A connection the server closed while the call
    /// waited for its slot would fail after the grant was spent: its grant is given back
    /// unsent and both are taken again, counted with the stale grants (at most
    /// [`MAX_STALE_GRANTS`] in all).
    async fn ready_to_send(
        &self,
        deadline: Deadline,
        bound: Duration,
        endpoint: Endpoint,
    ) -> Result<(Connection, Grant, u32), Unsent> {
        // The bound is on waiting for the gate; opening connections is not counted in it.
        let mut at_gate = Duration::ZERO;
        let mut given_back = 0;
        loop {
            let conn = self
                .transport
                .connection(deadline)
                .await
                .map_err(Unsent::Connect)?;
            let asked = Instant::now();
            let granted = self
                .fresh_grant(deadline, bound.saturating_sub(at_gate), endpoint)
                .await;
            at_gate += asked.elapsed();
            let (grant, stale) = match granted {
                Ok(g) => g,
                Err(e) => {
                    self.transport.release(conn);
                    return Err(Unsent::Gate(e));
                }
            };
            given_back += stale;
            if conn.fit() {
                return Ok((conn, grant, given_back));
            }
            self.gate.give_back(&grant).await.map_err(Unsent::Gate)?;
            given_back += 1;
            if given_back >= MAX_STALE_GRANTS {
                return Err(Unsent::Gate(GateError::Unsettled {
                    calls: grant.round_trips,
                    reslotted: given_back,
                }));
            }
            tracing::debug!(
                given_back,
                "law.go.kr: the server closed the connection during the gate wait; slot given back"
            );
        }
    }

    /// The retry loop around single attempts.
    async fn call(
        &self,
        endpoint: Endpoint,
        format: Format,
        params: &[(&'static str, String)],
        deadline: Deadline,
    ) -> Result<Answer, LawError> {
        let gate_cfg: GateConfig = *self.gate.config();
        let mut last_status = None;
        for attempt in 0..self.max_attempts {
            let attempts = attempt + 1;
            if !deadline.allows(MIN_CALL_WINDOW) {
                return Err(LawError::OutOfTime { attempts: attempt });
            }
            // The slot must leave room for the call itself before the deadline.
            let bound = self.gate_wait.unwrap_or(gate_cfg.max_wait);
            let (conn, grant, given_back) = match self.ready_to_send(deadline, bound, endpoint).await {
                Ok(ready) => ready,
                // A certificate refused is not a blip: no retry can fix it.
                Err(Unsent::Connect(NetKind::Tls(problem))) => {
                    return Err(LawError::KeyRefused(KeyProblem::Tls { problem }));
                }
                Err(Unsent::Connect(kind)) => {
                    if attempts == self.max_attempts {
                        return Err(LawError::Network { kind, attempts });
                    }
                    let delay = (backoff(attempt) + jitter(backoff(attempt))).min(RETRY_AFTER_CAP);
                    let pause = Pause {
                        endpoint,
                        attempts,
                        status: last_status,
                        delay,
                    };
                    self.back_off(pause, Because::NoConnection(kind), None, deadline)
                        .await?;
                    continue;
                }
                // On a retry, keep what the earlier attempts learned (calls made, or
                // connections that failed): whatever stops the next one, the job has made
                // attempts.
                Err(Unsent::Gate(e)) if attempt > 0 => {
                    return Err(LawError::TryLater {
                        wait: e.retry_after().unwrap_or(GATE_REFUSED_RETRY),
                        status: last_status,
                        attempts: attempt,
                    });
                }
                Err(Unsent::Gate(e)) => return Err(e.into()),
            };
            let waited = grant.waited;
            let new_connection = conn.fresh;
            let span = tracing::info_span!(
                "law.call",
                endpoint = endpoint.name(),
                attempt = attempts,
                status = tracing::field::Empty
            );
            let (started_at, sent) = (SystemTime::now(), Instant::now());
            let grant_to_send = grant.age();
            // A probe is answered within its window or not at all: past it, the gate lets
            // the next call probe, and two must not be out at once.
            let attempt_deadline = if grant.probe {
                deadline.sooner(Deadline::after(self.probe_window.saturating_sub(grant.age())))
            } else {
                deadline
            };
            let outcome = self
                .transport
                .attempt(conn, endpoint, format, &self.oc, params, attempt_deadline)
                .instrument(span.clone())
                .await;
            let observe = |status: Option<u16>, cooldown: Option<Duration>| {
                if let Some(o) = &self.observer {
                    o.observe(&CallEvent {
                        endpoint,
                        attempt: attempts,
                        started_at,
                        waited,
                        status,
                        took: sent.elapsed(),
                        cooldown,
                        grant_to_send,
                        given_back,
                        granted_at_us: grant.granted_at_us,
                        new_connection,
                    });
                }
            };
            // The cooldown a dropped connection set, which the pause below must wait out
            // exactly: a second draw of jitter would wake this caller before the cooldown
            // ends, and the gate would refuse it a slot it could have waited for.
            let mut dropped_cooldown = None;
            let (status, retry_after) = match outcome {
                Attempt::Body(body) => {
                    observe(Some(200), None);
                    return Ok(Answer {
                        body,
                        granted_at_us: grant.granted_at_us,
                        cooldown_end_us: grant.cooldown_end_us,
                        probe: grant.probe,
                    });
                }
                Attempt::Fatal(e) => {
                    // Refused before sending, or a 200 whose body could not be taken.
                    observe((!matches!(e, LawError::InvalidRequest(_))).then_some(200), None);
                    self.probe_unanswered(&grant).await;
                    return Err(e);
                }
                Attempt::Status { status, retry_after } => {
                    span.record("status", status);
                    if !(status == 429 || (500..=599).contains(&status)) {
                        observe(Some(status), None);
                        self.probe_unanswered(&grant).await;
                        return Err(LawError::Http { status, attempts });
                    }
                    (Some(status), retry_after)
                }
                Attempt::Network(kind) => {
                    // Sent, and the connection dropped without a status: a throttle may
                    // answer so. The whole cluster holds off as after a 429 without
                    // Retry-After, not this caller alone.
                    if kind == NetKind::Other {
                        let delay = (backoff(attempt) + jitter(backoff(attempt))).min(RETRY_AFTER_CAP);
                        observe(None, Some(delay));
                        if let Err(e) = self.gate.defer(delay).await {
                            tracing::warn!(error = %e, "rate gate: could not set the cluster cooldown after a dropped connection");
                        }
                        dropped_cooldown = Some(delay);
                    } else {
                        observe(None, None);
                    }
                    // After the cooldown, so that no caller probes into what held this one.
                    self.probe_unanswered(&grant).await;
                    if attempts == self.max_attempts {
                        return Err(LawError::Network { kind, attempts });
                    }
                    (None, None)
                }
            };
            last_status = status;
            let asked = retry_after.unwrap_or(Duration::ZERO);
            let backoff = backoff(attempt);
            let delay = dropped_cooldown
                .unwrap_or_else(|| (asked.max(backoff) + jitter(backoff)).min(RETRY_AFTER_CAP));
            if status == Some(429) {
                observe(status, Some(delay));
                let deferred = self.gate.defer(delay).await;
                self.probe_unanswered(&grant).await;
                if let Err(e) = deferred {
                    // The call was made and answered 429: an attempt, whatever Redis does.
                    tracing::warn!(error = %e, "rate gate: could not set the cluster cooldown after a 429");
                    return Err(LawError::TryLater {
                        wait: delay,
                        status,
                        attempts,
                    });
                }
            } else if status.is_some() {
                observe(status, None);
                self.probe_unanswered(&grant).await;
            }
            let spent = (attempts == self.max_attempts).then_some(LawError::Http {
                status: status.unwrap_or(0),
                attempts,
            });
            let pause = Pause {
                endpoint,
                attempts,
                status,
                delay,
            };
            self.back_off(pause, Because::Answered, spent, deadline).await?;
        }
        Err(LawError::OutOfTime {
            attempts: self.max_attempts,
        })
    }
}

/// An attempt that is to be followed by another, after `delay`.
struct Pause {
    endpoint: Endpoint,
    attempts: u32,
    /// The last status law.go.kr answered, if any.
    status: Option<u16>,
    delay: Duration,
}

/// Why the next attempt waits: no connection could be opened, or law.go.kr answered 429,
/// a 5xx or nothing.
enum Because {
    NoConnection(crate::law::NetKind),
    Answered,
}

impl LawClient {
    /// Sleeps out `pause` before the next attempt, or says why the call stops here: a wait
    /// past the gate's bound is not slept (the retry queue comes back after it, which is
    /// also when a cooldown ends); `spent`, the error for a call out of attempts, comes
    /// next; then a wait that leaves no room for the call before the deadline.
    async fn back_off(
        &self,
        pause: Pause,
        because: Because,
        spent: Option<LawError>,
        deadline: Deadline,
    ) -> Result<(), LawError> {
        let Pause {
            endpoint,
            attempts,
            status,
            delay,
        } = pause;
        let try_later = LawError::TryLater {
            wait: delay,
            status,
            attempts,
        };
        if delay > self.gate.config().max_wait {
            return Err(try_later);
        }
        if let Some(e) = spent {
            return Err(e);
        }
        if !deadline.allows(delay + MIN_CALL_WINDOW) {
            return Err(try_later);
        }
        let delay_ms = delay.as_millis() as u64;
        match because {
            Because::NoConnection(kind) => tracing::info!(
                endpoint = endpoint.name(),
                attempt = attempts,
                kind = kind.describe(),
                delay_ms,
                "law.go.kr: no connection; backing off"
            ),
            Because::Answered => tracing::info!(
                endpoint = endpoint.name(),
                attempt = attempts,
                status,
                delay_ms,
                "law.go.kr: backing off"
            ),
        }
        tokio::time::sleep(delay).await;
        Ok(())
    }
}

/// Why a call was not sent: no connection, or no grant.
#[derive(Debug)]
enum Unsent {
    Connect(crate::law::NetKind),
    Gate(GateError),
}

/// A format as [`Served`] holds it.
fn format_code(f: Format) -> u8 {
    match f {
        Format::Json => 0,
        Format::Xml => 1,
    }
}

/// 2^attempt × [`BACKOFF_BASE`], attempt 0-based.
fn backoff(attempt: u32) -> Duration {
    BACKOFF_BASE.saturating_mul(1u32 << attempt.min(16))
}

/// Upward jitter up to [`BACKOFF_JITTER_FRACTION`] of `base`.
fn jitter(base: Duration) -> Duration {
    base.mul_f64(rand::rng().random_range(0.0..=BACKOFF_JITTER_FRACTION))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn backoff_doubles_from_one_second() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(2), Duration::from_secs(4));
    }

    #[test]
    fn jitter_is_upward_and_bounded() {
        for _ in 0..1000 {
            let j = jitter(Duration::from_secs(4));
            assert!(j <= Duration::from_millis(800), "{j:?}");
        }
    }

    #[test]
    fn parse_retry_after_is_reexported() {
        assert_eq!(
            parse_retry_after("2", SystemTime::now()),
            Some(Duration::from_secs(2))
        );
    }
}
