//! The key-health circuit: one cluster-wide answer to "does law.go.kr accept this key from
//! here?", beside the key's gate in Redis.
//!
//! The first refusal of the key ([`KeyProblem`]: the verification failure, the anti-bot
//! page, a list or body not applied for, a certificate that cannot be verified) opens the
//! circuit and, in the same script, holds off the calls it is about for the probe interval
//! ([`KeyHealth::refused`]): for a refusal of the key, no instance calls law.go.kr until it
//! ends; for an API not granted, no instance calls that API (the other goes on). Every job
//! that meets the hold is parked without counting an attempt (the gate refuses it, which is
//! not a failure of the job). The opening owes one alert, which the drainer takes on a lease,
//! sends with the likely cause and the fix, and confirms ([`KeyHealth::take_alert`],
//! [`KeyHealth::alert_delivered`]); an alert whose delivery is never confirmed is offered
//! again when its lease ends. A circuit that closes and opens again for the same reason
//! within [`KEY_HEALTH_KEEP`] of a delivered alert owes none. When the hold ends, the next
//! call that could close the circuit is its probe ([`crate::gate::Gate::acquire_probing`]):
//! no other such call starts until its answer is in, it is given back, it ends with no
//! answer about the key ([`KeyHealth::probe_over`]), or its window passes. Refused again, the hold starts over; answered, the probe
//! closes the circuit ([`KeyHealth::accepted`]) if it reached what the circuit is about
//! (the API not granted, for a list or body refused; anything, for the key itself) and was
//! granted after the latest refusal. An open circuit nothing has refused for
//! [`KEY_HEALTH_KEEP`] expires, and the next call probes as if it were closed.
//!
//! Beside it, two records that help an operator see why: the format each endpoint was last
//! found served in ([`KeyHealth::learned_format`]), and the last few replies of no known
//! shape, key masked ([`KeyHealth::keep_unknown`]), which `lawsync probe` shows.
//!
//! Keys share the gate's hash tag: `{lawsync:gate:UPSTREAM:FP}:health`, `…:alerted`,
//! `…:format`, `…:unknown`, one set per API key whatever the environment, as the gate.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::gate::Gate;
use crate::law::Endpoint;
use crate::law::format::Format;
use crate::law::refusals::KeyProblem;
use crate::policy::{
    KEY_ALERT_LEASE, KEY_HEALTH_KEEP, LEARNED_FORMAT_KEEP, RETRY_AFTER_CAP, UNKNOWN_REPLIES_KEPT,
    UNKNOWN_REPLY_BYTES,
};
use crate::redis_conn::{RedisConn, RedisFailure};

/// The circuit and its records, for one API key's gate.
#[derive(Debug, Clone)]
pub struct KeyHealth {
    conn: RedisConn,
    gate: String,
    health: String,
    alerted: String,
    format: String,
    unknown: String,
}

/// An open circuit, as Redis holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenCircuit {
    /// [`KeyProblem::kind`] of the refusal that opened it.
    pub reason: String,
    /// [`KeyProblem::kind`] of the latest refusal.
    pub last_reason: String,
    /// What a call must reach to close it: `search` or `detail` (an API the key is not
    /// granted), or `any` (the key itself).
    pub scope: String,
    /// When the first refusal opened it, epoch ms on Redis' clock.
    pub opened_ms: u64,
    /// When the latest refusal came.
    pub last_ms: u64,
    /// Refusals since it opened: the first, then one per failed probe.
    pub refusals: u64,
    /// Whether the opening's alert is still to be sent.
    pub alert_owed: bool,
    /// Until when calls the circuit is about are held (a probe in flight, or the hold after
    /// a refusal of one API), epoch µs on Redis' clock; `None` when nothing is held in the
    /// circuit (a refusal of the key holds the gate itself: its cooldown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until_us: Option<u64>,
    /// A probe is in flight.
    #[serde(default)]
    pub probing: bool,
}

/// What [`KeyHealth::refused`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// This refusal opened the circuit.
    pub opened: bool,
    pub opened_ms: u64,
    pub refusals: u64,
    /// The end of the hold on the calls the circuit is about (the whole gate for a refusal
    /// of the key, that API's calls for an API not granted), µs on Redis' clock.
    pub hold_until_us: u64,
}

/// What [`KeyHealth::accepted`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// Nothing was open.
    NothingOpen,
    /// It was open, and this call closed it.
    Closed(OpenCircuit),
    /// It is open, and this call shows nothing about it (another API than the one refused,
    /// or granted before the latest refusal).
    StillOpen(OpenCircuit),
}

/// A reply of no known shape, as kept for `lawsync probe`: where and when, and its first
/// bytes with the key masked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownReply {
    pub at_ms: u64,
    /// `search` or `detail`.
    pub endpoint: String,
    /// The format asked for.
    pub format: Format,
    /// Bytes in the whole reply.
    pub bytes: usize,
    /// Why it was not read: an HTML page of no known shape, a body that did not parse.
    pub why: String,
    /// Its first [`UNKNOWN_REPLY_BYTES`], the key masked, cut at a character boundary.
    pub head: String,
}

impl KeyHealth {
    /// The records of the gate whose state lives at `gate_key`.
    pub fn beside(conn: RedisConn, gate_key: &str) -> Self {
        let named = |name: &str| crate::keys::beside_gate(gate_key, name);
        Self {
            conn,
            gate: gate_key.to_owned(),
            health: named("health"),
            alerted: named("alerted"),
            format: named("format"),
            unknown: named("unknown"),
        }
    }

    /// The circuit's hash key.
    pub fn key(&self) -> &str {
        &self.health
    }

    /// law.go.kr refused the key on a call to `endpoint`: opens the circuit, or counts one
    /// more refusal, and holds off the calls it is about for `hold` (at most
    /// [`RETRY_AFTER_CAP`], as a cooldown), in one step: every call through `gate` (this
    /// circuit's) for a refusal of the key, calls to `endpoint` alone for an API not
    /// granted.
    pub async fn refused(
        &self,
        problem: &KeyProblem,
        endpoint: Endpoint,
        gate: &Gate,
        hold: Duration,
    ) -> Result<Refused, RedisFailure> {
        let (interval_us, burst, tolerance_us, idle_ms) = gate.hold_shape().await?;
        let micros = |d: Duration| (d.min(RETRY_AFTER_CAP).as_micros() as u64).max(1);
        let v: Vec<i64> = crate::lua::KEY_REFUSED
            .prepare(&Keys(self))
            .arg(problem.kind())
            .arg(scope(problem, endpoint))
            .arg(KEY_HEALTH_KEEP.as_millis() as u64)
            .arg(micros(hold))
            .arg(interval_us)
            .arg(burst)
            .arg(tolerance_us)
            .arg(idle_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        match v.as_slice() {
            &[opened, opened_ms, refusals, until] => Ok(Refused {
                opened: opened == 1,
                opened_ms: opened_ms.max(0) as u64,
                refusals: refusals.max(0) as u64,
                hold_until_us: until.max(0) as u64,
            }),
            _ => Err(RedisFailure::Protocol("key_refused reply")),
        }
    }

    /// law.go.kr answered a call to `endpoint` granted at `granted_us` (Redis' clock):
    /// closes the circuit if that call shows the key accepted.
    pub async fn accepted(&self, endpoint: Endpoint, granted_us: u64) -> Result<Accepted, RedisFailure> {
        let v: (i64, String, i64, i64, i64) = crate::lua::KEY_ACCEPTED
            .prepare(&Keys(self))
            .arg(endpoint.name())
            .arg(granted_us / 1000)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let (closed, reason, opened_ms, refusals, alerted) = v;
        if reason.is_empty() {
            return Ok(Accepted::NothingOpen);
        }
        let circuit = OpenCircuit {
            last_reason: reason.clone(),
            reason,
            scope: String::new(),
            opened_ms: opened_ms.max(0) as u64,
            last_ms: 0,
            refusals: refusals.max(0) as u64,
            alert_owed: alerted == 0,
            held_until_us: None,
            probing: false,
        };
        Ok(if closed == 1 {
            Accepted::Closed(circuit)
        } else {
            Accepted::StillOpen(circuit)
        })
    }

    /// The probe granted at `granted_us` ended without an answer about the key: the next
    /// call may probe at once. True when it was the probe in flight.
    pub async fn probe_over(&self, granted_us: u64) -> Result<bool, RedisFailure> {
        let over: i64 = crate::lua::KEY_PROBE_OVER
            .prepare(&Keys(self))
            .arg(granted_us)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(over == 1)
    }

    /// The circuit, when open.
    pub async fn status(&self) -> Result<Option<OpenCircuit>, RedisFailure> {
        let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(&self.health)
            .query_async(&mut self.conn.clone())
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let corrupt = || RedisFailure::Corrupt(format!("{} is not a key-health circuit", self.health));
        let num = |name: &str| {
            fields
                .get(name)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(corrupt)
        };
        let text = |name: &str| fields.get(name).cloned().ok_or_else(corrupt);
        if fields.get("v").map(String::as_str) != Some("1") {
            return Err(corrupt());
        }
        Ok(Some(OpenCircuit {
            reason: text("reason")?,
            last_reason: text("last_reason")?,
            scope: text("scope")?,
            opened_ms: num("opened_ms")?,
            last_ms: num("last_ms")?,
            refusals: num("refusals")?,
            alert_owed: fields.contains_key("alert"),
            held_until_us: fields.get("probe_until").and_then(|v| v.parse().ok()),
            probing: fields.contains_key("probe_at"),
        }))
    }

    /// The opening's alert, for delivery: the circuit as it is, if its alert is owed and
    /// not taken by another pass within [`KEY_ALERT_LEASE`]. The caller sends it, then
    /// confirms it ([`KeyHealth::alert_delivered`]) or owes it again at once
    /// ([`KeyHealth::alert_undelivered`]); unconfirmed, it is offered again when the lease
    /// ends.
    pub async fn take_alert(&self) -> Result<Option<OpenCircuit>, RedisFailure> {
        let v: Vec<String> = crate::lua::KEY_ALERT
            .prepare(&Keys(self))
            .arg("take")
            .arg(KEY_ALERT_LEASE.as_millis() as u64)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let [reason, opened, last, refusals, last_reason] = v.as_slice() else {
            return Ok(None);
        };
        let num = |v: &String| {
            v.parse::<u64>()
                .map_err(|_| RedisFailure::Protocol("key_alert reply"))
        };
        Ok(Some(OpenCircuit {
            reason: reason.clone(),
            last_reason: last_reason.clone(),
            scope: String::new(),
            opened_ms: num(opened)?,
            last_ms: num(last)?,
            refusals: num(refusals)?,
            alert_owed: false,
            held_until_us: None,
            probing: false,
        }))
    }

    /// The alert taken from `circuit` was delivered: no longer owed, and a circuit that
    /// opens again for the same reason within [`KEY_HEALTH_KEEP`] owes none. True when that
    /// opening was still open.
    pub async fn alert_delivered(&self, circuit: &OpenCircuit) -> Result<bool, RedisFailure> {
        let open: i64 = crate::lua::KEY_ALERT
            .prepare(&Keys(self))
            .arg("delivered")
            .arg(circuit.opened_ms)
            .arg(&circuit.reason)
            .arg(KEY_HEALTH_KEEP.as_millis() as u64)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(open == 1)
    }

    /// Owes the alert of the opening `circuit` was taken from again, after a delivery that
    /// failed; nothing when that opening is no longer open.
    pub async fn alert_undelivered(&self, circuit: &OpenCircuit) -> Result<bool, RedisFailure> {
        let owed: i64 = crate::lua::KEY_ALERT
            .prepare(&Keys(self))
            .arg("owe")
            .arg(circuit.opened_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(owed == 1)
    }

    /// The format `endpoint` was last found served in, by any instance.
    pub async fn learned_format(&self, endpoint: Endpoint) -> Result<Option<Format>, RedisFailure> {
        let v: Option<String> = redis::cmd("HGET")
            .arg(&self.format)
            .arg(endpoint.name())
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(v.as_deref().and_then(Format::parse))
    }

    /// Keeps `format` as the one `endpoint` is served in.
    pub async fn learn_format(&self, endpoint: Endpoint, format: Format) -> Result<(), RedisFailure> {
        let _: () = redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(&self.format)
            .arg(endpoint.name())
            .arg(format.name())
            .ignore()
            .cmd("PEXPIRE")
            .arg(&self.format)
            .arg(LEARNED_FORMAT_KEEP.as_millis() as u64)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Keeps a reply of no known shape for `lawsync probe` (the newest
    /// [`UNKNOWN_REPLIES_KEPT`]).
    pub async fn keep_unknown(&self, reply: &UnknownReply) -> Result<(), RedisFailure> {
        let json = serde_json::to_string(reply).map_err(|_| RedisFailure::Protocol("unknown reply"))?;
        let _: () = redis::pipe()
            .atomic()
            .cmd("LPUSH")
            .arg(&self.unknown)
            .arg(json)
            .ignore()
            .cmd("LTRIM")
            .arg(&self.unknown)
            .arg(0)
            .arg(UNKNOWN_REPLIES_KEPT as i64 - 1)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&self.unknown)
            .arg(LEARNED_FORMAT_KEEP.as_millis() as u64)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// The replies of no known shape kept, newest first.
    pub async fn unknown_replies(&self) -> Result<Vec<UnknownReply>, RedisFailure> {
        let raw: Vec<String> = redis::cmd("LRANGE")
            .arg(&self.unknown)
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(raw.iter().filter_map(|r| serde_json::from_str(r).ok()).collect())
    }
}

/// What a call must reach to close the circuit a refusal opens: the endpoint, for an API
/// the key was not granted; anything, for a refusal of the key itself.
fn scope(problem: &KeyProblem, endpoint: Endpoint) -> &'static str {
    match problem {
        KeyProblem::NotApplied { .. } => endpoint.name(),
        _ => "any",
    }
}

/// The circuit's keys under the names its scripts give them.
struct Keys<'a>(&'a KeyHealth);

impl crate::lua::ScriptKeys for Keys<'_> {
    fn key(&self, name: &str) -> Option<&str> {
        match name {
            "health" => Some(&self.0.health),
            "alerted" => Some(&self.0.alerted),
            "gate" => Some(&self.0.gate),
            _ => None,
        }
    }
}

impl UnknownReply {
    /// The record of `body`, its head cut to [`UNKNOWN_REPLY_BYTES`] at a character boundary
    /// and every occurrence of the key masked.
    pub fn of(endpoint: &str, format: Format, body: &[u8], why: &str, key: &crate::secret::Secret) -> Self {
        let text = String::from_utf8_lossy(body);
        // Scrubbed whole before it is cut, so that a key across the cut is masked too.
        let scrubbed = key.scrub(&text);
        let mut end = scrubbed.len().min(UNKNOWN_REPLY_BYTES);
        while !scrubbed.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            at_ms: crate::clock::now_millis(),
            endpoint: endpoint.to_owned(),
            format,
            bytes: body.len(),
            why: why.to_owned(),
            head: scrubbed[..end].to_owned(),
        }
    }
}
