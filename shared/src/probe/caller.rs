//! [`Caller`]: the probe's calls, through the client and its gate like every other call,
//! counted against a budget of requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

use crate::deadline::Deadline;
use crate::law::{CallEvent, CallObserver, LawClient, LawError, PrecedentDetail, SearchPage, SearchRequest};

/// Why a probe call gave nothing to read. Safe to print: a [`LawError`] never carries the
/// key, a URL or a body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailed {
    /// The call was not started: its attempts would not fit in what is left.
    #[error("not asked: the probe's budget of {budget} requests is spent")]
    Budget { budget: u32 },
    #[error(transparent)]
    Law(LawError),
}

impl CallFailed {
    /// True when law.go.kr answered and the answer refused this request (a status other
    /// than 429, an empty or malformed reply, no such precedent): evidence about the
    /// request. Otherwise (the budget, the gate, the network, a rejected key, a 429) the
    /// call says nothing about what was asked.
    pub fn is_refusal(&self) -> bool {
        match self {
            CallFailed::Law(LawError::Http { status, .. }) => *status != 429,
            CallFailed::Law(LawError::Malformed { .. } | LawError::EmptyBody | LawError::NotFound) => true,
            _ => false,
        }
    }
}

/// Counts every attempt the client makes: each is a request law.go.kr counts against the key.
#[derive(Debug, Default)]
struct Attempts(AtomicU32);

impl CallObserver for Attempts {
    fn observe(&self, _: &CallEvent) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The probe's client: each call waits on the shared gate, and none starts unless all of
/// its attempts fit in the budget.
#[derive(Debug)]
pub struct Caller {
    client: LawClient,
    attempts: Arc<Attempts>,
    max_attempts: u32,
    budget: u32,
    calls: u32,
}

impl Caller {
    /// `max_attempts` is the client's own (`LAW_API_MAX_ATTEMPTS`): the most requests one
    /// call may take.
    pub fn new(client: LawClient, max_attempts: u32, budget: u32) -> Self {
        let attempts = Arc::new(Attempts::default());
        Self {
            // The probe reports what it sees; it never opens or closes the cluster's
            // key-health circuit (it may run from an address the key is not registered for).
            client: client.with_observer(attempts.clone()).observing_only(),
            attempts,
            max_attempts: max_attempts.max(1),
            budget,
            calls: 0,
        }
    }

    /// Calls made (each one or more requests).
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Requests sent to law.go.kr, retries included.
    pub fn requests(&self) -> u32 {
        self.attempts.0.load(Ordering::Relaxed)
    }

    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// The client's key-health records (the circuit, the replies of no known shape).
    pub fn health(&self) -> &crate::key_health::KeyHealth {
        self.client.health()
    }

    fn admit(&mut self) -> Result<(), CallFailed> {
        if self.requests() + self.max_attempts > self.budget {
            return Err(CallFailed::Budget { budget: self.budget });
        }
        self.calls += 1;
        Ok(())
    }

    /// One search page, with the `PrecSearch` object as sent.
    pub async fn search(&mut self, req: &SearchRequest) -> Result<(SearchPage, Value), CallFailed> {
        self.admit()?;
        self.client
            .search_as_sent(req, Deadline::NONE)
            .await
            .map_err(CallFailed::Law)
    }

    /// Whether the key is served the list API in `format` (see [`LawClient::served_in`]).
    pub async fn served_in(&mut self, format: crate::law::Format) -> Result<(), CallFailed> {
        self.admit()?;
        self.client
            .served_in(format, Deadline::NONE)
            .await
            .map_err(CallFailed::Law)
    }

    /// One precedent's detail.
    pub async fn detail(&mut self, id: &str) -> Result<PrecedentDetail, CallFailed> {
        self.admit()?;
        self.client
            .detail(id, Deadline::NONE)
            .await
            .map_err(CallFailed::Law)
    }
}
