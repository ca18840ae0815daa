//! A law.go.kr look-alike: the DRF search and detail endpoints over a deterministic
//! synthetic corpus, the OC and Referer checked, and the rate rule enforced — a call that
//! arrives closer than the configured interval to the previous call is answered 429 with
//! `Retry-After: 1`, whoever sent it.
//!
//! Faults are injected at start (`--inject`) or at run time through a small control
//! endpoint, `POST /_control/fault` with an [`Injection`] (or an array of them); each
//! applies to the next `count` API calls (of one endpoint, when named). Every API call is
//! logged with its arrival time, endpoint, status and cause, never its OC:
//! `GET /_control/log?since=N` returns the log from entry N on.
//!
//! It publishes late, as the real service does (see [`corpus`]): each precedent has a
//! publication date, some have no decision date, some are revised later. Its "today"
//! ([`LookalikeConfig::today`], `--today`, `POST /_control/today` with
//! `{"today":"YYYYMMDD"}` or `{"today":null}`, [`Lookalike::set_today`]) decides what is out:
//! a precedent published after it is absent from searches and `totalCnt`, and its detail is
//! the `{"Law": NO_MATCH}` not-found body; a revision dated after it is not applied yet.
//! Without a today everything is published and every revision applied; `GET /_control/today`
//! tells the current one, and `POST /_control/reset` (faults and log) leaves it as it is. A date-window
//! search (`prncYd=A~B`) never lists undated precedents; a search without one lists them
//! after the dated ones.
//!
//! It can break two assumptions the mirror rests on, for `lawsync probe` to find
//! ([`Quirks`]; [`LookalikeConfig::quirks`], `--page-limit D [--page-limit-error]` and
//! `--unstable-total`, `POST /_control/quirks` with a [`Quirks`] object, `GET
//! /_control/quirks`, [`Lookalike::set_quirks`]): a paging limit, past which a search page
//! answers without hits (or with HTTP 400), and a `totalCnt` that grows with the page.
//! `POST /_control/reset` leaves them as they are.
//!
//! It serves `type=JSON` and `type=XML` (see [`xml`]) from the same data, and can refuse
//! either with the page law.go.kr sends a key not granted it ([`Quirks::refuse_json`],
//! [`Quirks::refuse_xml`]). It can refuse the caller's address as law.go.kr refuses an IP
//! not registered with the key ([`LookalikeConfig::registered`], `POST
//! /_control/registered` with `{"ips":["127.0.0.1"]}` or `{"ips":null}`), and throttle
//! without a 429 ([`Fault::Throttle`], an HTML page on a 200; [`Fault::Reset`], the
//! connection reset after the request).
//!
//! The integration tests start it in-process ([`Lookalike::start`]); the demo runs the
//! `law-lookalike` binary.

pub mod corpus;
pub mod world;
pub mod xml;

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use crate::upstream::{Body, Reply, Seen, read_head, write_reply};
pub use corpus::{Change, Corpus, Precedent, Revision};
pub use world::{World, WorldShape};

/// The Referer the real service requires since 2026 (a prefix match).
pub const REFERER_PREFIX: &str = "https://www.law.go.kr";
/// law.go.kr's answer, on HTTP 200, to a key or Referer it does not accept.
pub const VERIFY_FAILED: &str = "사용자 정보 검증에 실패하였습니다.";
/// law.go.kr's answer, on HTTP 200, for a precedent it does not have.
pub const NO_MATCH: &str = "일치하는 판례가 없습니다.  판례명을 확인하여 주십시오.";

/// How the look-alike is set up.
#[derive(Debug, Clone)]
pub struct LookalikeConfig {
    /// The only OC it accepts.
    pub oc: String,
    /// The rate rule; `None` disables it.
    pub interval: Option<Duration>,
    pub seed: u64,
    /// Appends every arrival to this file as a JSON line.
    pub log_file: Option<std::path::PathBuf>,
    /// Prints a line per arrival to stderr.
    pub echo: bool,
    /// Time every API reply takes before its status line (law.go.kr answers a detail in
    /// roughly 100-300 ms); a `slow` fault adds to it.
    pub latency: Duration,
    /// The service's "today" (YYYYMMDD): precedents published after it are not served, and
    /// revisions dated after it not applied. `None`: everything is published.
    pub today: Option<String>,
    /// Only precedents decided in `(from, to)` (YYYYMMDD), none undated: see
    /// [`Corpus::decided_within`].
    pub decided: Option<(String, String)>,
    /// Assumptions it breaks; none by default.
    pub quirks: Quirks,
    /// Serves this world instead of the seed's corpus (`seed` then only draws latencies):
    /// law.go.kr's volume, indexed (see [`world`]).
    pub world: Option<Arc<World>>,
    /// Adds to [`LookalikeConfig::latency`] a time drawn uniformly from `lo..=hi` for each
    /// API reply, from a generator seeded by `seed`: long judgments are slow to render.
    pub latency_spread: Option<(Duration, Duration)>,
    /// The caller addresses registered with the key; others fail verification. `None`:
    /// every address is.
    pub registered: Option<Vec<std::net::IpAddr>>,
}

/// Assumptions of the mirror the look-alike can break.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Quirks {
    /// Search pages past a depth answer without hits or with an error, as some APIs cap
    /// paging.
    #[serde(default)]
    pub page_limit: Option<PageLimit>,
    /// `totalCnt` says one more hit for each page after the first.
    #[serde(default)]
    pub unstable_total: bool,
    /// `type=JSON` answered with the page of an API not applied for, as law.go.kr answers a
    /// key granted XML only.
    #[serde(default)]
    pub refuse_json: bool,
    /// The same for `type=XML`.
    #[serde(default)]
    pub refuse_xml: bool,
}

/// A cap on paging: pages after `depth` answer as `beyond` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageLimit {
    /// The deepest page answered with its hits, 1 or more.
    pub depth: u32,
    #[serde(default)]
    pub beyond: Beyond,
}

/// How a page past a [`PageLimit`] answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Beyond {
    /// The usual reply with `totalCnt`, but no `prec`.
    #[default]
    NoHits,
    /// HTTP 400 with an HTML page.
    Error,
}

impl Quirks {
    /// Checks the quirks, or says which field is wrong.
    pub fn check(&self) -> Result<(), String> {
        match self.page_limit {
            Some(PageLimit { depth: 0, .. }) => Err("pageLimit.depth: must be 1 or more".into()),
            _ => Ok(()),
        }
    }
}

impl LookalikeConfig {
    pub fn new(oc: &str) -> Self {
        Self {
            oc: oc.to_owned(),
            interval: Some(Duration::from_secs(1)),
            seed: 1,
            log_file: None,
            echo: false,
            latency: Duration::ZERO,
            today: None,
            decided: None,
            quirks: Quirks::default(),
            world: None,
            latency_spread: None,
            registered: None,
        }
    }
}

/// Checks a "today" for the look-alike: a YYYYMMDD calendar day, or why not (without the
/// text). Callers name the field: `today: ...`, `--today: ...`.
pub fn check_today(today: &str) -> Result<(), String> {
    lawsync::law::calendar::day_number(today)
        .map(|_| ())
        .map_err(|why| format!("not a YYYYMMDD date: {why}"))
}

/// In every fault's body or header, so a test can prove no upstream body reached a log,
/// an error, Redis, an alert or a stored document.
pub const BODY_MARKER: &str = "UPSTREAM-BODY-9f31";

/// A fault the next calls get instead of their answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// 429 with `Retry-After` in seconds, or as an HTTP-date that many seconds ahead.
    TooMany {
        #[serde(default)]
        retry_after: Option<u64>,
        #[serde(default)]
        as_date: bool,
    },
    /// A bare status: 500, 502, 503, 404...
    Status { status: u16 },
    /// 302 to a maintenance page.
    Redirect,
    /// The anti-bot HTML page, on a 200.
    Html,
    /// `{"result":"사용자 정보 검증에 실패하였습니다.","msg":...}` on a 200; the msg echoes the OC.
    Result,
    /// `{"Law":"일치하는 판례가 없습니다..."}` on a 200.
    Law,
    /// A 200 whose chunked body runs to `bytes`.
    Oversized { bytes: u64 },
    /// The real answer, after `delay_ms`.
    Slow { delay_ms: u64 },
    /// A 200 with an empty body.
    Empty,
    /// A 200 with an HTML page of no known shape: a throttle page this look-alike made up
    /// (law.go.kr's own, if it has one, has not been recorded publicly).
    Throttle,
    /// The connection reset once the request is read: no status, no body.
    Reset,
    /// A 200 with the page of a list or body API the key has not applied for.
    NotApplied,
}

impl Fault {
    fn name(&self) -> &'static str {
        match self {
            Fault::TooMany { .. } => "too_many",
            Fault::Status { .. } => "status",
            Fault::Redirect => "redirect",
            Fault::Html => "html",
            Fault::Result => "result",
            Fault::Law => "law",
            Fault::Oversized { .. } => "oversized",
            Fault::Slow { .. } => "slow",
            Fault::Empty => "empty",
            Fault::Throttle => "throttle",
            Fault::Reset => "reset",
            Fault::NotApplied => "not_applied",
        }
    }
}

/// A fault for the next `count` calls, of one endpoint (`search`/`detail`) or any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Injection {
    #[serde(flatten)]
    pub fault: Fault,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub endpoint: Option<String>,
}

fn one() -> u32 {
    1
}

impl Injection {
    pub fn new(fault: Fault, count: u32) -> Self {
        Self {
            fault,
            count,
            endpoint: None,
        }
    }
}

/// One API call as the look-alike saw it. No OC: only whether it was the right one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Arrival, milliseconds since the Unix epoch.
    pub at_ms: f64,
    /// `search`, `detail` or `other`.
    pub endpoint: String,
    /// `ID` of a detail call, `page` of a search.
    #[serde(default)]
    pub item: Option<String>,
    /// A search's date window (`prncYd`, e.g. `20240101~20240131`); `None` for the whole
    /// list and for details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    pub status: u16,
    /// `ok`, `rate` (the rule broken), `injected:<fault>`, `verify` (OC or Referer),
    /// `unregistered` (the caller's address), `not_applied` (a format refused),
    /// `no_match`, `unpublished` (a detail published after today), `page_limit` (a
    /// search page past [`Quirks::page_limit`]), `bad_request` or `not_found`.
    pub cause: String,
    /// The format asked for (`json`, `xml`), as the `type` parameter said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

#[derive(Debug)]
struct State {
    cfg: LookalikeConfig,
    corpus: Corpus,
    /// YYYYMMDD, checked; see [`LookalikeConfig::today`].
    today: Option<String>,
    /// See [`LookalikeConfig::quirks`]; moved by `POST /_control/quirks`.
    quirks: Quirks,
    last_call: Option<Instant>,
    faults: VecDeque<Injection>,
    log: Vec<Arrival>,
    /// Draws [`LookalikeConfig::latency_spread`].
    rng: world::SplitMix,
    /// See [`LookalikeConfig::registered`]; moved by `POST /_control/registered`.
    registered: Option<Vec<std::net::IpAddr>>,
}

/// The running look-alike. Dropping it stops accepting.
#[derive(Debug)]
pub struct Lookalike {
    pub base_url: String,
    /// The only OC it accepts (its config's).
    pub oc: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Lookalike {
    /// Starts on a free loopback port.
    pub async fn start(cfg: LookalikeConfig) -> std::io::Result<Self> {
        Self::bind("127.0.0.1:0", cfg).await
    }

    /// Starts on `addr`; an invalid [`LookalikeConfig::today`] is an `InvalidInput` error
    /// naming it.
    pub async fn bind(addr: &str, cfg: LookalikeConfig) -> std::io::Result<Self> {
        if let Some(today) = &cfg.today {
            check_today(today)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("today: {e}")))?;
        }
        cfg.quirks
            .check()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("quirks: {e}")))?;
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let oc = cfg.oc.clone();
        let state = Arc::new(Mutex::new(State {
            corpus: cfg
                .decided
                .as_ref()
                .and_then(|(a, b)| Corpus::decided_within(cfg.seed, a, b))
                .unwrap_or_else(|| Corpus::new(cfg.seed)),
            today: cfg.today.clone(),
            quirks: cfg.quirks,
            rng: world::SplitMix(cfg.seed ^ 0x6C61_7465_6E63_7921),
            registered: cfg.registered.clone(),
            cfg,
            last_call: None,
            faults: VecDeque::new(),
            log: Vec::new(),
        }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                // A reply is written as its head, then its body: with Nagle's algorithm
                // the body waits for the client's delayed ACK of the head, 40 ms a call.
                let _ = sock.set_nodelay(true);
                tokio::spawn(serve(sock, st.clone()));
            }
        });
        Ok(Self {
            base_url: format!("http://{addr}"),
            oc,
            state,
            task,
        })
    }

    /// Queues a fault for the next calls.
    pub fn inject(&self, injection: Injection) {
        lock(&self.state).faults.push_back(injection);
    }

    /// Every API call so far.
    pub fn arrivals(&self) -> Vec<Arrival> {
        lock(&self.state).log.clone()
    }

    pub fn corpus(&self) -> Corpus {
        lock(&self.state).corpus
    }

    /// Moves the service's "today" (YYYYMMDD), or lifts it with `None`; an invalid date is
    /// refused, `today: why`, and changes nothing.
    pub fn set_today(&self, today: Option<&str>) -> Result<(), String> {
        if let Some(t) = today {
            check_today(t).map_err(|e| format!("today: {e}"))?;
        }
        lock(&self.state).today = today.map(str::to_owned);
        Ok(())
    }

    /// Breaks (or, with the default, restores) assumptions of the mirror; invalid quirks
    /// are refused, `quirks: why`, and change nothing.
    pub fn set_quirks(&self, quirks: Quirks) -> Result<(), String> {
        quirks.check().map_err(|e| format!("quirks: {e}"))?;
        lock(&self.state).quirks = quirks;
        Ok(())
    }

    /// The service's "today", if set.
    pub fn today(&self) -> Option<String> {
        lock(&self.state).today.clone()
    }

    /// Registers exactly these caller addresses with the key (`None`: every address).
    pub fn set_registered(&self, ips: Option<Vec<std::net::IpAddr>>) {
        lock(&self.state).registered = ips;
    }
}

impl Drop for Lookalike {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

async fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>) {
    let mut buf = Vec::new();
    let peer = sock.peer_addr().ok().map(|a| a.ip());
    while let Some(req) = read_head(&mut sock, &mut buf).await {
        let reply = answer(&state, &req, peer);
        let close = req
            .header("Connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        if write_reply(&mut sock, reply).await.is_err() || close {
            return;
        }
    }
}

fn answer(state: &Mutex<State>, req: &Seen, peer: Option<std::net::IpAddr>) -> Reply {
    if let Some(control) = req.path.strip_prefix("/_control/") {
        return self::control(state, control, req);
    }
    let mut st = lock(state);
    let endpoint = match req.path.as_str() {
        "/DRF/lawSearch.do" => "search",
        "/DRF/lawService.do" => "detail",
        _ => "other",
    };
    let item = match endpoint {
        "search" => Some(req.param("page").unwrap_or("1").to_owned()),
        "detail" => req.param("ID").map(str::to_owned),
        _ => None,
    };
    let (reply, cause) = if endpoint == "other" {
        (
            Reply::status(404).text("<html><body>404 Not Found</body></html>"),
            "not_found".to_owned(),
        )
    } else {
        let (reply, cause) = st.respond(endpoint, req, peer);
        let delay = reply.delay + st.cfg.latency + st.spread();
        (reply.delayed(delay), cause)
    };
    let arrival = Arrival {
        // When the request was read, as the rule above judges it: not after the answer
        // was computed (a day's first listing takes milliseconds).
        at_ms: lawsync::clock::epoch_millis_f64(req.at_wall),
        endpoint: endpoint.to_owned(),
        item,
        window: (endpoint == "search")
            .then(|| req.param("prncYd").map(str::to_owned))
            .flatten(),
        status: reply.status,
        cause,
        format: asked_format(req).map(|f| f.name().to_owned()),
    };
    if st.cfg.echo {
        eprintln!(
            "law-lookalike: {:.3} {} {} {} {}",
            arrival.at_ms / 1000.0,
            arrival.endpoint,
            arrival.item.as_deref().unwrap_or("-"),
            arrival.status,
            arrival.cause
        );
    }
    if let Some(path) = &st.cfg.log_file
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(f, "{}", serde_json::to_string(&arrival).unwrap_or_default());
    }
    st.log.push(arrival);
    reply
}

impl State {
    /// A draw of [`LookalikeConfig::latency_spread`], zero without one.
    fn spread(&mut self) -> Duration {
        match self.cfg.latency_spread {
            Some((lo, hi)) if hi > lo => lo + (hi - lo).mul_f64(self.rng.unit()),
            Some((lo, _)) => lo,
            None => Duration::ZERO,
        }
    }

    fn respond(&mut self, endpoint: &str, req: &Seen, peer: Option<std::net::IpAddr>) -> (Reply, String) {
        // The rule first, as on the real service: every call counts, answered or not.
        let too_close = matches!((self.cfg.interval, self.last_call), (Some(min), Some(last)) if req.at.duration_since(last) < min);
        self.last_call = Some(req.at);
        if too_close {
            return (Reply::status(429).header("Retry-After", "1"), "rate".to_owned());
        }
        if let Some(pos) = self
            .faults
            .iter()
            .position(|f| f.endpoint.as_deref().is_none_or(|e| e == endpoint))
        {
            let fault = self.faults[pos].fault.clone();
            self.faults[pos].count = self.faults[pos].count.saturating_sub(1);
            if self.faults[pos].count == 0 {
                self.faults.remove(pos);
            }
            let cause = format!("injected:{}", fault.name());
            return (self.fault_reply(fault, endpoint, req, peer), cause);
        }
        self.real_reply(endpoint, req, peer)
    }

    fn fault_reply(&self, fault: Fault, endpoint: &str, req: &Seen, peer: Option<std::net::IpAddr>) -> Reply {
        match fault {
            Fault::TooMany { retry_after, as_date } => {
                let r = Reply::status(429);
                match retry_after {
                    Some(s) if as_date => r.header(
                        "Retry-After",
                        &httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(s)),
                    ),
                    Some(s) => r.header("Retry-After", &s.to_string()),
                    None => r,
                }
            }
            Fault::Status { status } => {
                Reply::status(status).text(format!("<html><body>Service Unavailable {BODY_MARKER}</body></html>"))
            }
            Fault::Redirect => Reply::status(302).header(
                "Location",
                &format!("https://www.law.go.kr/LSW/maintenance.html?{BODY_MARKER}"),
            ),
            Fault::Html => Reply::status(200)
                .header("Content-Type", "text/html;charset=UTF-8")
                .text(format!("<html><head><script>location.assign('/LSW/check.do?rsn=bot&{BODY_MARKER}');</script></head><body></body></html>")),
            Fault::Result => {
                let oc = req.param("OC").unwrap_or("");
                formatted(req, json!({"result": VERIFY_FAILED, "msg": format!("OC({oc}) 사용자 정보를 확인하여 주십시오. {BODY_MARKER}")}))
            }
            Fault::Law => formatted(req, json!({ "Law": NO_MATCH })),
            Fault::Throttle => Reply::status(200)
                .header("Content-Type", "text/html;charset=UTF-8")
                .text(format!("<!DOCTYPE html><html><head><title>요청 제한</title></head><body><p>요청이 너무 많습니다. 잠시 후 다시 시도해 주십시오.</p><!-- {BODY_MARKER} --></body></html>")),
            Fault::Reset => Reply::status(0).with_body(Body::Reset),
            Fault::NotApplied => not_applied_page(),
            Fault::Oversized { bytes } => Reply::status(200)
                .header("Content-Type", "application/json;charset=UTF-8")
                .with_body(Body::Endless { total: bytes }),
            Fault::Empty => Reply::status(200).header("Content-Type", "application/json;charset=UTF-8"),
            Fault::Slow { delay_ms } => self
                .real_reply(endpoint, req, peer)
                .0
                .delayed(Duration::from_millis(delay_ms)),
        }
    }

    fn real_reply(&self, endpoint: &str, req: &Seen, peer: Option<std::net::IpAddr>) -> (Reply, String) {
        let referer_ok = req
            .header("Referer")
            .is_some_and(|r| r.starts_with(REFERER_PREFIX));
        let oc = req.param("OC").unwrap_or("");
        let verify_failed = || {
            let msg = format!(
                "OC({oc}) 사용자 정보를 확인하여 주십시오. 등록된 IP, 도메인(Referer)인지 확인하세요."
            );
            formatted(req, json!({"result": VERIFY_FAILED, "msg": msg}))
        };
        let registered = match (&self.registered, peer) {
            (None, _) => true,
            (Some(ips), Some(ip)) => ips.contains(&ip),
            (Some(_), None) => false,
        };
        if !registered {
            return (verify_failed(), "unregistered".to_owned());
        }
        if !referer_ok || oc != self.cfg.oc {
            return (verify_failed(), "verify".to_owned());
        }
        let format = asked_format(req);
        if req.param("target") != Some("prec") || format.is_none() {
            let msg = "target, type 요청 변수를 확인하여 주십시오.";
            return (
                json_reply(json!({"result": "요청 변수가 올바르지 않습니다.", "msg": msg})),
                "bad_request".to_owned(),
            );
        }
        let refused = match format {
            Some(lawsync::law::Format::Json) => self.quirks.refuse_json,
            Some(lawsync::law::Format::Xml) => self.quirks.refuse_xml,
            None => false,
        };
        if refused {
            return (not_applied_page(), "not_applied".to_owned());
        }
        if endpoint == "search" {
            let page = req.param("page").and_then(|v| v.parse::<u32>().ok()).unwrap_or(1);
            return match self.quirks.page_limit {
                Some(PageLimit { depth, beyond }) if page > depth => match beyond {
                    Beyond::NoHits => (formatted(req, self.search(req, true)), "page_limit".to_owned()),
                    Beyond::Error => (
                        Reply::status(400).text(format!(
                            "<html><body>page out of range {BODY_MARKER}</body></html>"
                        )),
                        "page_limit".to_owned(),
                    ),
                },
                _ => (formatted(req, self.search(req, false)), "ok".to_owned()),
            };
        }
        let today = self.today.as_deref();
        let id = req.param("ID").and_then(|id| id.parse::<u64>().ok());
        let found = match (&self.cfg.world, id) {
            (Some(w), Some(id)) => w.get(id).cloned(),
            (None, Some(id)) => self.corpus.get(id),
            (_, None) => None,
        };
        match found {
            Some(p) if !p.is_published_by(today) => (
                formatted(req, json!({ "Law": NO_MATCH })),
                "unpublished".to_owned(),
            ),
            Some(p) if !p.detail_missing => (
                formatted(req, json!({ "PrecService": p.detail_on(today) })),
                "ok".to_owned(),
            ),
            _ => (formatted(req, json!({ "Law": NO_MATCH })), "no_match".to_owned()),
        }
    }

    /// The search reply; `cut`: past a paging limit, without its hits.
    fn search(&self, req: &Seen, cut: bool) -> Value {
        // No window (or one that is not `A~B`) lists everything, undated ones included.
        let window = req.param("prncYd").and_then(|w| w.split_once('~'));
        let today = self.today.as_deref();
        let newest_first = req.param("sort") == Some("ddes");
        let query = req.param("query").filter(|q| !q.is_empty());
        let num = |name: &str, default: usize| {
            req.param(name)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(default)
        };
        let display = num("display", 20).clamp(1, 100);
        let page = num("page", 1).max(1);
        let skip = (page - 1).saturating_mul(display);
        let (total, mut items): (usize, Vec<Value>) = match (&self.cfg.world, query) {
            // The world's listing is indexed and kept for the day: a page costs its items.
            (Some(w), None) => {
                let (total, hits) = w.page(window, today, newest_first, skip, display);
                let items = hits.iter().map(|p| p.search_item_on(&self.cfg.oc, today));
                (total, items.collect())
            }
            (world, query) => {
                let mut hits = match world {
                    Some(w) => w
                        .page(window, today, newest_first, 0, usize::MAX)
                        .1
                        .into_iter()
                        .cloned()
                        .collect(),
                    None => self.corpus.listing(window, today, newest_first),
                };
                if let Some(q) = query {
                    hits.retain(|p| p.case_name_on(today).contains(q));
                }
                let items = hits.iter().skip(skip).take(display);
                (
                    hits.len(),
                    items.map(|p| p.search_item_on(&self.cfg.oc, today)).collect(),
                )
            }
        };
        if cut {
            items.clear();
        }
        let drift = if self.quirks.unstable_total { page - 1 } else { 0 };
        let mut body = json!({
            "target": "prec",
            "키워드": query.unwrap_or("*"),
            "section": "evtNm",
            "totalCnt": (total + drift).to_string(),
            "page": page.to_string(),
        });
        // One hit is an object, none leaves `prec` out: as the real service does.
        match items.len() {
            0 => {}
            1 => body["prec"] = items[0].clone(),
            _ => body["prec"] = Value::Array(items),
        }
        json!({ "PrecSearch": body })
    }
}

fn control(state: &Mutex<State>, what: &str, req: &Seen) -> Reply {
    match (req.method.as_str(), what) {
        ("POST", "fault") => {
            let parsed: Result<Vec<Injection>, _> =
                serde_json::from_str::<Value>(&req.body).and_then(|v| match v {
                    Value::Array(_) => serde_json::from_value(v),
                    one => serde_json::from_value(one).map(|i| vec![i]),
                });
            match parsed {
                Ok(list) => {
                    let n = list.len();
                    lock(state).faults.extend(list);
                    json_reply(json!({ "queued": n }))
                }
                Err(e) => Reply::status(400).text(format!("bad injection: {e}")),
            }
        }
        ("POST", "reset") => {
            let mut st = lock(state);
            st.faults.clear();
            st.log.clear();
            st.last_call = None;
            json_reply(json!({ "reset": true }))
        }
        ("POST", "today") => match parse_today_body(&req.body) {
            Ok(today) => {
                lock(state).today = today.clone();
                json_reply(json!({ "today": today }))
            }
            Err(e) => Reply::status(400).text(format!("bad today: {e}")),
        },
        ("GET", "today") => json_reply(json!({ "today": lock(state).today })),
        ("POST", "quirks") => match serde_json::from_str::<Quirks>(&req.body)
            .map_err(|e| e.to_string())
            .and_then(|q| q.check().map(|()| q))
        {
            Ok(q) => {
                lock(state).quirks = q;
                json_reply(serde_json::to_value(q).unwrap_or_default())
            }
            Err(e) => Reply::status(400).text(format!("bad quirks: {e}")),
        },
        ("GET", "quirks") => json_reply(serde_json::to_value(lock(state).quirks).unwrap_or_default()),
        ("POST", "registered") => match parse_registered_body(&req.body) {
            Ok(ips) => {
                lock(state).registered = ips.clone();
                json_reply(json!({ "ips": ips }))
            }
            Err(e) => Reply::status(400).text(format!("bad registered: {e}")),
        },
        ("GET", "log") => {
            let since = req
                .param("since")
                .and_then(|s| s.parse::<usize>().ok())
                .unwrap_or(0);
            let st = lock(state);
            json_reply(serde_json::to_value(st.log.get(since..).unwrap_or(&[])).unwrap_or_default())
        }
        _ => Reply::status(404)
            .text("control: POST fault | POST reset | POST today | GET today | POST quirks | GET quirks | POST registered | GET log?since=N"),
    }
}

/// The body of `POST /_control/today`: `{"today":"YYYYMMDD"}` or `{"today":null}`, nothing
/// else; an error names the field.
fn parse_today_body(body: &str) -> Result<Option<String>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v
        .as_object()
        .ok_or("want an object {\"today\": \"YYYYMMDD\" | null}")?;
    if let Some(other) = obj.keys().find(|k| k.as_str() != "today") {
        return Err(format!("unknown field {other:?}; only \"today\""));
    }
    match obj.get("today") {
        None => Err("today: missing; a YYYYMMDD date or null".to_owned()),
        Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => {
            check_today(t).map_err(|e| format!("today: {e}"))?;
            Ok(Some(t.clone()))
        }
        Some(_) => Err("today: not a string; a YYYYMMDD date or null".to_owned()),
    }
}

fn json_reply(v: Value) -> Reply {
    Reply::json(v.to_string())
}

/// The format a request asked for (`type`, case-blind), if JSON or XML.
fn asked_format(req: &Seen) -> Option<lawsync::law::Format> {
    req.param("type").and_then(lawsync::law::Format::parse)
}

/// A reply in the format the request asked for: the JSON built, or its XML ([`xml`]).
fn formatted(req: &Seen, v: Value) -> Reply {
    match asked_format(req) {
        Some(lawsync::law::Format::Xml) => Reply::status(200)
            .header("Content-Type", "text/xml;charset=UTF-8")
            .text(xml::render(&v)),
        _ => json_reply(v),
    }
}

/// The page law.go.kr answers, on a 200, for a list or body API the key has not applied
/// for (its heading as public clients recorded it; the rest of the page made up).
fn not_applied_page() -> Reply {
    Reply::status(200)
        .header("Content-Type", "text/html;charset=UTF-8")
        .text("<!DOCTYPE html><html><head><title>국가법령정보 공동활용</title></head><body><h2>미신청된 목록/본문에 대한 접근입니다.</h2><p>OPEN API 로그인 후 [OPEN API] -> [OPEN API 신청] -> 등록된 API 선택 후 법령종류를 체크해 주세요.</p></body></html>")
}

/// The body of `POST /_control/registered`: `{"ips":["127.0.0.1",…]}` or `{"ips":null}`.
fn parse_registered_body(body: &str) -> Result<Option<Vec<std::net::IpAddr>>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Registered {
        ips: Option<Vec<std::net::IpAddr>>,
    }
    serde_json::from_str::<Registered>(body)
        .map(|r| r.ips)
        .map_err(|e| format!("want {{\"ips\": [\"<address>\", …] | null}}: {e}"))
}

/// One raw HTTP/1.1 request to a local server at `base` (`http://127.0.0.1:PORT`), on a
/// connection of its own, and the whole reply as text: the look-alike's `/_control/`
/// endpoints, and calls shaped as no client library would send them. Waits at most 2 s.
pub async fn raw_request(
    base: &str,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut sock = TcpStream::connect(addr).await?;
    let mut req = format!("{method} {path_and_query} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    sock.write_all(req.as_bytes()).await?;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), sock.read_to_end(&mut out)).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
