//! The two units of work, [`JobKind::Search`] (one page) and [`JobKind::Detail`] (one
//! precedent), as both the SQS handlers and the drainer run them, and what a failure turns
//! into.

use std::time::Duration;

use serde_json::json;

use super::Deps;
use super::outbox::QueueName;
use super::sqs::DetailMessage;
use crate::deadline::Deadline;
use crate::drainer::Outcome;
use crate::gate::{GateError, Refusal};
use crate::law::calendar::normalize_date;
use crate::law::{Disposition, LawError, PrecedentSummary, Probe, SearchRequest};
use crate::mirror::StoredEvent;
use crate::mirror::envelope::{
    Envelope, MissingMarker, SCHEMA_VERSION, content_hash, listing_hash, parse_rfc3339_millis,
};
use crate::mirror::held::{FetchReason, Held, Verdict, verdict};
use crate::mirror::layout;
use crate::mirror::runs::{ChangeLine, Counted, IdState, PageCount, RunId};
use crate::policy::GATE_REFUSED_RETRY;
use crate::queue::{Buried, Enqueued, ErrorNote, Job, JobKind};

/// A failed unit of work, sanitized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Law(#[from] LawError),
    #[error("could not store the document: {0}")]
    Store(String),
    #[error("could not send follow-up messages: {0}")]
    Fanout(String),
    #[error("could not count the page in its run: {0}")]
    Run(String),
}

impl JobError {
    fn note(&self) -> ErrorNote {
        let (kind, status) = match self {
            JobError::Law(e) => (e.kind().to_owned(), e.status()),
            JobError::Store(_) => ("store".to_owned(), None),
            JobError::Fanout(_) => ("fanout".to_owned(), None),
            JobError::Run(_) => ("run".to_owned(), None),
        };
        ErrorNote::now(kind, self.to_string(), status)
    }

    fn disposition(&self) -> Disposition {
        match self {
            JobError::Law(e) => e.disposition(),
            JobError::Store(_) | JobError::Fanout(_) | JobError::Run(_) => Disposition::RetryLater(None),
        }
    }
}

/// One search page: the hits not held (or held with other list metadata, or recorded
/// missing long enough ago, or all of them with `refresh`) become detail messages carrying
/// what the page saw; the next page, if any, a message on the search queue; and the page
/// is counted in its run. Sending twice is harmless (a detail for a held precedent is
/// skipped before any call), so a partial send fails the whole page, to be retried whole.
pub async fn run_search(deps: &Deps, req: &SearchRequest, deadline: Deadline) -> Result<u32, JobError> {
    if let Some(probe) = req.probe {
        return run_probe(deps, req, probe, deadline).await;
    }
    // A page of a complete run was fanned out and every id it listed settled: a delivery
    // of it again costs no call. A page counted in a run still open is read again, on
    // purpose: after a crash lost its detail messages, reading it again is what sends them.
    if let Some(run) = &req.run
        && run_complete_with_page(deps, run, req).await?
    {
        tracing::info!(run = %run, page = req.page.unwrap_or(1), "search: the run is complete; page not read again");
        return Ok(0);
    }
    let page = deps.law.search(req, deadline).await?;
    if let Some(run) = req.run.as_ref().filter(|r| r.is_backfill())
        && super::backfill::split_if_large(deps, req, page.total).await?
    {
        // Replaced by its halves, its run dropped: the pump releases them.
        super::backfill::after_window(deps, run).await;
        return Ok(0);
    }
    let now = crate::clock::now_millis();
    let ids: Vec<&str> = page.items.iter().map(|p| p.id.as_str()).collect();
    let held = deps
        .held
        .lookup(&ids)
        .await
        .map_err(|e| JobError::Store(e.to_string()))?;
    let mut bodies = Vec::new();
    let mut states = Vec::with_capacity(ids.len());
    let mut elsewhere = 0u32;
    // The backfill's undated window reads the whole list for the hits without a decision
    // date; a dated hit there belongs to its month window, in the backfill or not.
    let undated_only = req
        .run
        .as_ref()
        .is_some_and(|r| r.as_str() == super::backfill::UNDATED_RUN);
    for (hit, held) in page.items.iter().zip(&held) {
        if undated_only && hit.decided_yyyymmdd().is_some() {
            // Counted, not kept: the run's ids would be the whole corpus in Redis.
            elsewhere += 1;
            continue;
        }
        match verdict(hit, held.as_ref(), req.refresh, now) {
            Verdict::Skip { .. } => states.push((hit.id.as_str(), IdState::Skipped)),
            Verdict::Fetch {
                reason,
                first_seen_ms,
            } => {
                let msg = DetailMessage {
                    id: hit.id.clone(),
                    run: req.run.clone(),
                    listing: Some(hit.clone()),
                    first_seen_at: Some(crate::clock::rfc3339_millis(first_seen_ms.unwrap_or(now))),
                    reason: Some(reason),
                    refresh: req.refresh,
                };
                bodies.push(serde_json::to_string(&msg).map_err(|e| JobError::Fanout(e.to_string()))?);
                states.push((hit.id.as_str(), IdState::Sent));
            }
        }
    }
    if page.skipped_items > 0 {
        tracing::warn!(
            skipped = page.skipped_items,
            "search: hits without an id were skipped"
        );
    }
    if !bodies.is_empty() {
        let failed = deps
            .outbox
            .send(QueueName::Detail, &bodies)
            .await
            .map_err(|e| JobError::Fanout(e.to_string()))?;
        if !failed.is_empty() {
            return Err(JobError::Fanout(format!(
                "{} of {} detail messages not sent",
                failed.len(),
                bodies.len()
            )));
        }
    }
    let more = page.has_more(req.display.unwrap_or(crate::policy::MAX_DISPLAY));
    if more {
        let next = serde_json::to_string(&req.next_page()).map_err(|e| JobError::Fanout(e.to_string()))?;
        let failed = deps
            .outbox
            .send(QueueName::Search, &[next])
            .await
            .map_err(|e| JobError::Fanout(e.to_string()))?;
        if !failed.is_empty() {
            return Err(JobError::Fanout("the next-page message was not sent".into()));
        }
    }
    if let Some(run) = &req.run {
        // The page asked for, not the one the reply names: a reply without `page` must not
        // count as page 1 again.
        let count = PageCount {
            part: &req.window_name(),
            page: req.page.unwrap_or(1),
            last: !more,
            total: page.total,
            without_id: page.skipped_items,
            elsewhere,
            ids: &states,
            ..Default::default()
        };
        count_page(deps, run, &count).await?;
    }
    tracing::info!(
        sent = bodies.len(),
        skipped = states.len() - bodies.len(),
        total = page.total,
        page = page.page,
        "search: page fanned out"
    );
    Ok(bodies.len() as u32)
}

/// Whether `run` is complete and counted `req`'s page.
async fn run_complete_with_page(deps: &Deps, run: &RunId, req: &SearchRequest) -> Result<bool, JobError> {
    let counted = deps
        .runs
        .page_counted(run, &req.window_name(), req.page.unwrap_or(1))
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    if !counted {
        return Ok(false);
    }
    let status = deps
        .runs
        .status(run)
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    Ok(status.is_some_and(|s| s.completed_ms.is_some()))
}

/// Counts a search page of `run`, writes its record when that completes it, and goes on
/// with the backfill when `run` is one of its windows.
async fn count_page(deps: &Deps, run: &RunId, count: &PageCount<'_>) -> Result<(), JobError> {
    let (counted, _) = deps
        .runs
        .page(run, count)
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    after_count(deps, run, counted).await;
    super::backfill::after_window(deps, run).await;
    Ok(())
}

/// One probe of the daily run: `totalCnt` of a month (or the whole list) against what the
/// mirror holds for it; the window is read in full when it lists more than is held (a
/// recent month always). The window's first page is sent before the probe counts itself
/// done, so the run cannot complete in between; the last month probe sends the
/// whole-list probe.
async fn run_probe(
    deps: &Deps,
    req: &SearchRequest,
    probe: Probe,
    deadline: Deadline,
) -> Result<u32, JobError> {
    let Some(run) = &req.run else {
        return Err(JobError::Law(LawError::InvalidRequest(
            "a probe belongs to a run: run is required with probe".into(),
        )));
    };
    let part = super::schedule::probe_part(req);
    // A probe answered before is not asked again: a repeated firing costs no call. Only
    // the whole-list probe may be owed, if the delivery that counted the last month
    // stopped before sending it.
    if deps
        .runs
        .page_counted(run, &part, 1)
        .await
        .map_err(|e| JobError::Run(e.to_string()))?
    {
        if probe != Probe::All && months_answered(deps, run).await? {
            super::schedule::send_searches(deps, &[super::schedule::all_probe(run, req.refresh)]).await?;
        }
        return Ok(0);
    }
    let page = deps.law.search(req, deadline).await?;
    let (months, held_total) = deps
        .held
        .held_by_month()
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    let window = SearchRequest {
        probe: None,
        page: None,
        display: None,
        ..req.clone()
    };
    let (read, unheld) = match probe {
        Probe::Recent | Probe::Month => {
            let held = months
                .get(&crate::mirror::held::month_of(Some(&req.from)))
                .copied()
                .unwrap_or(0);
            let unheld = page.total.saturating_sub(held);
            (probe == Probe::Recent || unheld > 0, Some(unheld))
        }
        Probe::All => {
            // Outside the probed months (undated precedents, and those decided before):
            // what law.go.kr lists against what the mirror holds, both now, so details
            // stored since the month probes answered move neither side.
            let status = deps
                .runs
                .status(run)
                .await
                .map_err(|e| JobError::Run(e.to_string()))?;
            let (probed_total, probed_months) = status.map_or((0, Vec::new()), |s| {
                let months = s
                    .plan
                    .as_ref()
                    .map(|p| {
                        p.windows
                            .iter()
                            .filter_map(|w| w.strip_prefix("probe:"))
                            .filter(|w| *w != "all")
                            .map(|w| crate::mirror::held::month_of(w.get(..8)))
                            .collect()
                    })
                    .unwrap_or_default();
                (s.probed_total, months)
            });
            let held_probed: u64 = probed_months
                .iter()
                .map(|m: &String| months.get(m).copied().unwrap_or(0))
                .sum();
            let listed_outside = page.total.saturating_sub(probed_total);
            let held_outside = held_total.saturating_sub(held_probed);
            (listed_outside > held_outside, None)
        }
    };
    if read {
        deps.runs
            .expect(run, &window.window_name())
            .await
            .map_err(|e| JobError::Run(e.to_string()))?;
        super::schedule::send_searches(deps, std::slice::from_ref(&window)).await?;
    }
    let spawn = if read {
        vec![window.window_name()]
    } else {
        Vec::new()
    };
    let count = PageCount {
        part: &part,
        page: 1,
        last: true,
        total: if probe == Probe::All { 0 } else { page.total },
        spawn: &spawn,
        probe_unheld: unheld,
        ..Default::default()
    };
    let (counted, probes_left) = deps
        .runs
        .page(run, &count)
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    tracing::info!(
        run = %run,
        window = %window.window_name(),
        total = page.total,
        unheld = unheld.unwrap_or(0),
        read,
        "probe: answered"
    );
    // The last month probe sends the whole-list probe; a repeated delivery of a probe
    // after the months are all in sends it again (it counts once), in case the first
    // delivery stopped before sending it.
    let months_done = match counted {
        Counted::Yes { .. } => probes_left == Some(0),
        Counted::Already if probe != Probe::All => months_answered(deps, run).await?,
        _ => false,
    };
    if months_done {
        super::schedule::send_searches(deps, &[super::schedule::all_probe(run, req.refresh)]).await?;
    }
    after_count(deps, run, counted).await;
    Ok(u32::from(read))
}

/// Whether every month probe of `run` has answered.
async fn months_answered(deps: &Deps, run: &RunId) -> Result<bool, JobError> {
    Ok(deps
        .runs
        .status(run)
        .await
        .map_err(|e| JobError::Run(e.to_string()))?
        .is_some_and(|s| s.probes_left == 0))
}

/// After a count: writes the run's record when it is owed now (a failure leaves it owed,
/// for the drainer's next pass), or says a run was not found.
async fn after_count(deps: &Deps, run: &RunId, counted: Counted) {
    match counted {
        Counted::Yes { record: true } => {
            if let Err(e) = deps.record_run(run).await {
                tracing::warn!(run = %run, error = %e, "run record not written; the drainer will write it");
            }
        }
        Counted::NoRun => {
            tracing::warn!(run = %run, "no such run in Redis (expired, or Redis lost it): this work is not counted");
        }
        Counted::Yes { record: false } | Counted::Already => {}
    }
}

/// Counts `state` for the run of a message, if it has one. A count that fails is an
/// error for the caller to retry the message with (the work itself is stored, so the
/// retry finds it held and counts it then).
pub async fn mark_run(
    deps: &Deps,
    run: Option<&RunId>,
    id: &str,
    state: IdState,
    change: Option<&ChangeLine>,
) -> Result<(), JobError> {
    let Some(run) = run else { return Ok(()) };
    let counted = deps
        .runs
        .mark(run, id, state, change)
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    after_count(deps, run, counted).await;
    Ok(())
}

/// [`mark_run`] where a failure can only be logged (the message's fate is decided).
pub async fn mark_run_logged(deps: &Deps, run: Option<&RunId>, id: &str, state: IdState) {
    if let Err(e) = mark_run(deps, run, id, state, None).await {
        tracing::warn!(error = %e, "run not counted");
    }
}

/// One precedent: fetched and stored as an envelope under `prec/{id}.json`, and indexed
/// by decision date. One that law.go.kr says does not exist is recorded under
/// `missing/{id}.json` and counts as done. A precedent held unchanged (the message came
/// twice, or another run fetched it first) is not fetched again unless `refresh` says so.
/// Returns what became of it, counted in the message's run.
pub async fn run_detail(deps: &Deps, msg: &DetailMessage, deadline: Deadline) -> Result<IdState, JobError> {
    msg.check()?;
    let id = msg.id.as_str();
    let key = layout::precedent(id).map_err(|e| JobError::Store(e.to_string()))?;
    let held = deps
        .held
        .lookup(&[id])
        .await
        .map_err(|e| JobError::Store(e.to_string()))?
        .pop()
        .flatten();
    let now = crate::clock::now_millis();
    if let Some(listing) = &msg.listing
        && matches!(
            verdict(listing, held.as_ref(), msg.refresh, now),
            Verdict::Skip { .. }
        )
    {
        tracing::info!("detail: held unchanged; not fetched");
        let (state, change) = stored_by_this_run(deps, msg, &key).await;
        mark_run(deps, msg.run.as_ref(), id, state, change.as_ref()).await?;
        return Ok(state);
    }
    let first_seen_ms = held
        .as_ref()
        .and_then(Held::first_seen_ms)
        .or_else(|| msg.first_seen_at.as_deref().and_then(parse_rfc3339_millis));
    let listing_hash = msg.listing.as_ref().map(listing_hash);
    let decided = msg.listing.as_ref().and_then(PrecedentSummary::decided_yyyymmdd);
    match deps.law.detail_as_sent(id, deadline).await {
        Ok((parsed, detail)) => {
            let fetched_ms = crate::clock::now_millis();
            let envelope = Envelope {
                schema_version: SCHEMA_VERSION,
                id: id.to_owned(),
                fetched_at: crate::clock::rfc3339_millis(fetched_ms),
                first_seen_at: first_seen_ms.map(crate::clock::rfc3339_millis),
                run_id: msg.run.clone().map(String::from),
                listing: msg.listing.clone(),
                listing_hash: listing_hash.clone(),
                content_hash: content_hash(&detail),
                detail,
            };
            let body = serde_json::to_vec(&envelope).map_err(|e| JobError::Store(e.to_string()))?;
            let state = match &held {
                None | Some(Held::Missing { .. }) => IdState::Added,
                Some(Held::Stored {
                    listing_hash: old_listing,
                    content_hash: old_content,
                    ..
                }) => {
                    if old_content.as_deref() == Some(envelope.content_hash.as_str())
                        && (listing_hash.is_none() || old_listing == &listing_hash)
                    {
                        IdState::Unchanged
                    } else {
                        IdState::Revised
                    }
                }
            };
            deps.docs
                .put(&key, &body)
                .await
                .map_err(|e| JobError::Store(e.to_string()))?;
            let decided = decided.or_else(|| parsed.decided_on.as_deref().and_then(normalize_date));
            if state != IdState::Unchanged {
                write_index(deps, id, decided.as_deref(), &envelope).await?;
            }
            deps.held
                .record(
                    id,
                    &Held::Stored {
                        listing_hash: listing_hash.or_else(|| old_listing_hash(held.as_ref())),
                        content_hash: Some(envelope.content_hash.clone()),
                        first_seen_ms,
                    },
                    decided.as_deref(),
                )
                .await;
            tracing::info!(bytes = body.len(), change = state.as_str(), "detail: stored");
            if let Some(o) = &deps.mirror_observer {
                o.stored(&StoredEvent {
                    decided: decided.clone(),
                    first_seen_ms,
                    fetched_ms,
                    state,
                });
            }
            let change = (state != IdState::Unchanged).then(|| ChangeLine {
                id: id.to_owned(),
                change: state.as_str().to_owned(),
                key: key.clone(),
                decided_on: decided,
                content_hash: Some(envelope.content_hash.clone()),
                at: envelope.fetched_at.clone(),
            });
            mark_run(deps, msg.run.as_ref(), id, state, change.as_ref()).await?;
            Ok(state)
        }
        Err(LawError::NotFound) => {
            let at = crate::clock::now_millis();
            let marker = MissingMarker {
                schema_version: SCHEMA_VERSION,
                id: id.to_owned(),
                status: "not_found".to_owned(),
                checked_at: crate::clock::rfc3339_millis(at),
                checked_at_ms: at,
                first_seen_at: first_seen_ms.map(crate::clock::rfc3339_millis),
                run_id: msg.run.clone().map(String::from),
                listing: msg.listing.clone(),
                listing_hash,
            };
            let missing_key = layout::missing(id).map_err(|e| JobError::Store(e.to_string()))?;
            let body = serde_json::to_vec(&marker).map_err(|e| JobError::Store(e.to_string()))?;
            deps.docs
                .put(&missing_key, &body)
                .await
                .map_err(|e| JobError::Store(e.to_string()))?;
            deps.held
                .record(
                    id,
                    &Held::Missing {
                        checked_ms: at,
                        first_seen_ms,
                    },
                    decided.as_deref(),
                )
                .await;
            tracing::warn!("detail: law.go.kr has no such precedent; recorded under missing/");
            // A first "missing", or a stored precedent gone missing, is news; a recheck
            // that finds it still missing is not.
            let news = !matches!(held, Some(Held::Missing { .. }));
            let change = news.then(|| ChangeLine {
                id: id.to_owned(),
                change: "missing".to_owned(),
                key: missing_key,
                decided_on: decided,
                content_hash: None,
                at: marker.checked_at.clone(),
            });
            mark_run(deps, msg.run.as_ref(), id, IdState::Missing, change.as_ref()).await?;
            Ok(IdState::Missing)
        }
        Err(e) => Err(e.into()),
    }
}

/// What a held precedent counts as in this message's run: skipped, unless this run's own
/// earlier delivery stored it and its count was lost (the store answered, Redis did not).
/// Then it counts as what that delivery did, by the reason the page sent it and what it
/// left in the store (an envelope or a missing marker of this run), with its feed line, so
/// the feed misses nothing.
async fn stored_by_this_run(deps: &Deps, msg: &DetailMessage, key: &str) -> (IdState, Option<ChangeLine>) {
    let Some(run) = &msg.run else {
        return (IdState::Skipped, None);
    };
    let ours = |v: &serde_json::Value| v.get("runId").and_then(|r| r.as_str()) == Some(run.as_str());
    let read = |k: String| async move {
        match deps.docs.get(&k).await {
            Ok(Some(body)) => serde_json::from_slice::<serde_json::Value>(&body).ok(),
            _ => None,
        }
    };
    let decided = msg.listing.as_ref().and_then(PrecedentSummary::decided_yyyymmdd);
    if let Some(e) = read(key.to_owned()).await.filter(ours) {
        let state = match msg.reason {
            Some(FetchReason::Revised | FetchReason::Refresh) => IdState::Revised,
            _ => IdState::Added,
        };
        let line = ChangeLine {
            id: msg.id.clone(),
            change: state.as_str().to_owned(),
            key: key.to_owned(),
            decided_on: decided,
            content_hash: e.get("contentHash").and_then(|h| h.as_str()).map(str::to_owned),
            at: e
                .get("fetchedAt")
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_owned(),
        };
        return (state, Some(line));
    }
    let Ok(missing_key) = layout::missing(&msg.id) else {
        return (IdState::Skipped, None);
    };
    if let Some(m) = read(missing_key.clone()).await.filter(ours) {
        // A recheck that found it still missing is no news; a first "missing" is.
        let news = msg.reason != Some(FetchReason::Recheck);
        let line = news.then(|| ChangeLine {
            id: msg.id.clone(),
            change: "missing".to_owned(),
            key: missing_key,
            decided_on: decided,
            content_hash: None,
            at: m
                .get("checkedAt")
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_owned(),
        });
        return (IdState::Missing, line);
    }
    (IdState::Skipped, None)
}

fn old_listing_hash(held: Option<&Held>) -> Option<String> {
    match held {
        Some(Held::Stored { listing_hash, .. }) => listing_hash.clone(),
        _ => None,
    }
}

/// `index/decided/{YYYYMMDD}/{id}.json` (or `undated/`): a small pointer to the envelope,
/// one object per precedent, so no writer rewrites another's.
async fn write_index(deps: &Deps, id: &str, decided: Option<&str>, env: &Envelope) -> Result<(), JobError> {
    let day = decided.unwrap_or("undated");
    let key = format!("{}decided/{day}/{id}.json", layout::INDEX.path);
    let body = json!({
        "schemaVersion": SCHEMA_VERSION,
        "id": id,
        "key": format!("{}{id}.json", layout::PRECEDENTS.path),
        "decidedOn": decided,
        "contentHash": env.content_hash,
        "fetchedAt": env.fetched_at,
    })
    .to_string();
    deps.docs
        .put(&key, body.as_bytes())
        .await
        .map_err(|e| JobError::Store(e.to_string()))
}

/// Whether the key-health circuit holds one API alone (a refusal of an API the key is not
/// granted), as opposed to the key. Unknown (Redis failing) reads as not: the drainer then
/// stops its pass, the careful side.
async fn one_api_held(deps: &Deps) -> bool {
    match deps.law.health().status().await {
        Ok(Some(c)) => c.scope != "any" && c.held_until_us.is_some() && !c.probing,
        _ => false,
    }
}

/// Runs `job` for the drainer and says how it went.
pub async fn run_job(deps: &Deps, job: &Job, deadline: Deadline) -> Outcome {
    // A backfill window's work gives way while another run is open.
    let run = job
        .payload
        .get("run")
        .and_then(|r| r.as_str())
        .and_then(|r| RunId::parse(r).ok());
    if super::backfill::yields(deps, run.as_ref()).await {
        return Outcome::Deferred {
            retry_in: super::backfill::yield_for(),
        };
    }
    let result = match &job.kind {
        JobKind::Search => {
            if job.payload.get("backfill").is_some() {
                match serde_json::from_value::<super::backfill::BackfillMessage>(job.payload.clone()) {
                    Ok(m) => super::backfill::start(deps, &m.backfill)
                        .await
                        .map(|_| ())
                        .map_err(JobError::from),
                    Err(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
                        "stored {} payload is not a backfill request",
                        job.kind
                    )))),
                }
            } else if job.payload.get("schedule").is_some() {
                match serde_json::from_value::<super::schedule::Firing>(job.payload.clone()) {
                    Ok(firing) => super::schedule::start(deps, &firing).await.map(|_| ()),
                    Err(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
                        "stored {} payload is not a schedule firing",
                        job.kind
                    )))),
                }
            } else {
                match serde_json::from_value::<SearchRequest>(job.payload.clone()) {
                    Ok(req) => run_search(deps, &req, deadline).await.map(|_| ()),
                    Err(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
                        "stored {} payload is not a search request",
                        job.kind
                    )))),
                }
            }
        }
        JobKind::Detail => match serde_json::from_value::<DetailMessage>(job.payload.clone()) {
            Ok(msg) => run_detail(deps, &msg, deadline).await.map(|_| ()),
            Err(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
                "stored {} payload is not a detail message",
                job.kind
            )))),
        },
        // An invalid message is kept as a dead letter, never run; one redriven, and a type
        // this release does not know, goes back to the dead letters saying so.
        JobKind::Invalid | JobKind::Unknown(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
            "no handler for job type {:?}",
            job.kind.as_str()
        )))),
    };
    // A refusal of one API holds that API alone only while the circuit's scope is that API;
    // refusals of both widen it to the key, and the gate itself holds everything.
    let one_api_held = matches!(
        &result,
        Err(JobError::Law(LawError::KeyRefused(
            crate::law::KeyProblem::NotApplied { .. }
        )))
    ) && one_api_held(deps).await;
    match result {
        Ok(()) => Outcome::Done,
        // The deadline, not the upstream, stopped it: not a failure.
        Err(JobError::Law(LawError::OutOfTime { .. })) => Outcome::NotStarted {
            retry_in: None,
            room_known: false,
        },
        // The gate refused before any call: not an attempt, whatever the reason. Due when the
        // gate expects room (the slot it would have granted: a cooldown's end, or behind the
        // callers ahead), or shortly when it could not say.
        // The key-health circuit holds this job's API (a probe in flight, or the API refused):
        // this job waits, and the others go on.
        Err(JobError::Law(LawError::Gate(GateError::WaitTooLong {
            wait,
            cause: crate::gate::Refusal::Circuit { .. },
            ..
        }))) => Outcome::Deferred { retry_in: wait },
        // law.go.kr refused this API alone: its jobs wait for the probe, the other API goes on.
        Err(JobError::Law(LawError::KeyRefused(crate::law::KeyProblem::NotApplied { .. })))
            if one_api_held =>
        {
            Outcome::Deferred {
                retry_in: deps.law.key_probe_interval(),
            }
        }
        Err(JobError::Law(LawError::Gate(GateError::WaitTooLong { wait, .. }))) => Outcome::NotStarted {
            retry_in: Some(wait),
            room_known: true,
        },
        // law.go.kr refused the key itself (the key-health circuit is open): the job did not
        // fail, so its attempt is not counted. Due when the circuit's probe is.
        Err(JobError::Law(LawError::KeyRefused(_))) => Outcome::NotStarted {
            retry_in: Some(deps.law.key_probe_interval()),
            room_known: true,
        },
        Err(JobError::Law(LawError::Gate(GateError::Unsettled { .. } | GateError::Unavailable(_)))) => {
            Outcome::NotStarted {
                retry_in: Some(GATE_REFUSED_RETRY),
                room_known: false,
            }
        }
        Err(e) => match e.disposition() {
            Disposition::Permanent => Outcome::Dead { error: e.note() },
            Disposition::RetryLater(after) => Outcome::Retry {
                error: e.note(),
                after,
            },
        },
    }
}

/// What becomes of an SQS message once its unit of work has run: deleted (done, parked or
/// buried as a dead letter) or handed back to SQS for redelivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageFate {
    /// Done (or recorded as not existing): the message is deleted.
    Done,
    /// Parked in the retry queue for the drainer: the message is deleted.
    Parked,
    /// Failed in a way no retry fixes: logged once, recorded as a dead letter; deleted.
    Permanent,
    /// Not finished and not parked (no time left, or Redis down): back to SQS.
    ReturnToSqs,
}

/// Decides what a failed SQS-borne job becomes: a try-later is parked in the retry queue
/// (the SQS message succeeds); a permanent failure is buried as a dead letter; if
/// neither can be written, or the invocation ran out of time, the message goes back to SQS.
pub async fn park_or_bury(deps: &Deps, job: &Job, err: JobError) -> MessageFate {
    if matches!(err, JobError::Law(LawError::OutOfTime { .. })) {
        return MessageFate::ReturnToSqs;
    }
    let note = err.note();
    let parked = match (&err, err.disposition()) {
        // Not a failure: the gate's next slot was beyond the handler's wait. Behind a
        // cluster cooldown it is due when the cooldown ends; behind other callers it is due
        // at once, for the environment that holds the slots to work off after its batch
        // (or the scheduled drainer). Never after the retry backoff.
        (JobError::Law(LawError::Gate(GateError::WaitTooLong { wait, cause, .. })), _) => {
            let due_in = match cause {
                Refusal::Cooldown { .. } | Refusal::Circuit { .. } => *wait,
                Refusal::Deadline | Refusal::QueueAhead => Duration::ZERO,
            };
            deps.queue.enqueue_due_in(job, due_in, note).await
        }
        // Not this job's failure: law.go.kr refused the key, and the whole cluster holds
        // off until a probe finds it accepted. Due then, without the retry backoff.
        (JobError::Law(LawError::KeyRefused(_)), _) => {
            deps.queue
                .enqueue_due_in(job, deps.law.key_probe_interval(), note)
                .await
        }
        (_, Disposition::RetryLater(after)) => deps.queue.enqueue(job, after, note).await,
        (_, Disposition::Permanent) => {
            tracing::error!(kind = %err_kind(&err), error = %err, "permanent failure; not retried");
            return match deps.queue.record_dead(job, note).await {
                Ok(Buried::Recorded) => MessageFate::Permanent,
                Ok(Buried::AlreadyDead) => {
                    tracing::warn!(
                        "already a dead letter: this failure was added to its history and alerted again"
                    );
                    MessageFate::Permanent
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not record the dead letter; returning the message to SQS");
                    MessageFate::ReturnToSqs
                }
            };
        }
    };
    match parked {
        Ok(Enqueued::Queued { due_in }) => {
            tracing::info!(kind = %err_kind(&err), due_in_ms = due_in.as_millis() as u64, "parked in the retry queue");
            MessageFate::Parked
        }
        Ok(Enqueued::AlreadyQueued) => MessageFate::Parked,
        Ok(Enqueued::Revived { due_in }) => {
            tracing::warn!(kind = %err_kind(&err), due_in_ms = due_in.as_millis() as u64, "was a dead letter: revived with fresh attempts by this new work");
            MessageFate::Parked
        }
        Err(e) => {
            tracing::error!(error = %e, "could not park the job; returning the message to SQS");
            MessageFate::ReturnToSqs
        }
    }
}

fn err_kind(e: &JobError) -> String {
    e.note().kind
}

/// A job became a dead letter: its run counts the id as dead, or the search page as
/// dead (the window's pages after it are never read).
pub async fn job_buried(deps: &Deps, job: &Job) {
    match &job.kind {
        JobKind::Detail => {
            if let Ok(msg) = serde_json::from_value::<DetailMessage>(job.payload.clone()) {
                mark_run_logged(deps, msg.run.as_ref(), &msg.id, IdState::Dead).await;
            }
        }
        JobKind::Search => {
            if let Ok(req) = serde_json::from_value::<SearchRequest>(job.payload.clone()) {
                page_buried(deps, &req).await;
            }
        }
        JobKind::Invalid | JobKind::Unknown(_) => {}
    }
}

/// Counts a dead search page in its run: its window ends there.
pub async fn page_buried(deps: &Deps, req: &SearchRequest) {
    let Some(run) = &req.run else { return };
    let part = match req.probe {
        Some(_) => super::schedule::probe_part(req),
        None => req.window_name(),
    };
    let month_probe = matches!(req.probe, Some(Probe::Recent | Probe::Month));
    let count = PageCount {
        part: &part,
        page: req.page.unwrap_or(1),
        last: true,
        dead: true,
        probe_unheld: month_probe.then_some(0),
        ..Default::default()
    };
    match deps.runs.page(run, &count).await {
        Ok((counted, probes_left)) => {
            let months_done = match counted {
                Counted::Already if month_probe => months_answered(deps, run).await.unwrap_or(false),
                _ => probes_left == Some(0),
            };
            if months_done {
                let all = super::schedule::all_probe(run, req.refresh);
                if let Err(e) = super::schedule::send_searches(deps, &[all]).await {
                    tracing::warn!(run = %run, error = %e, "whole-list probe not sent");
                }
            }
            after_count(deps, run, counted).await
        }
        Err(e) => tracing::warn!(run = %run, error = %e, "dead search page not counted in its run"),
    }
}

/// What a drainer pass owes the runs: the records not yet written, and (from the
/// scheduled drainer) one alert per run whose record shows a discrepancy.
pub async fn runs_owed(deps: &Deps, alerts: Option<&dyn crate::alert::AlertSink>, deadline: Deadline) {
    runs_owed_records(deps, alerts, deadline).await;
    if let Some(sink) = alerts {
        key_alert_owed(deps, sink, deadline).await;
    }
    super::backfill::after_pass(deps).await;
}

/// The key-health circuit's alert, when its opening owes one (see [`crate::key_health`]).
async fn key_alert_owed(deps: &Deps, sink: &dyn crate::alert::AlertSink, deadline: Deadline) {
    let health = deps.law.health();
    let circuit = match health.take_alert().await {
        Ok(Some(c)) => c,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "key-health alert unreadable");
            return;
        }
    };
    let bound = deadline.cap(crate::policy::ALERT_TIMEOUT);
    match tokio::time::timeout(bound, sink.key_refused(&deps.cfg.app_env, &circuit)).await {
        Ok(Ok(())) => {
            tracing::info!(reason = %circuit.reason, "key-health alert sent");
            if let Err(e) = health.alert_delivered(&circuit).await {
                // Unconfirmed, it is offered again when its lease ends: sent twice, not lost.
                tracing::warn!(error = %e, "key-health alert sent but not confirmed; it may be sent again");
            }
        }
        _ => {
            tracing::error!(reason = %circuit.reason, "key-health alert not delivered; kept for the next pass");
            if let Err(e) = health.alert_undelivered(&circuit).await {
                tracing::error!(error = %e, "key-health alert could not be kept");
            }
        }
    }
}

async fn runs_owed_records(deps: &Deps, alerts: Option<&dyn crate::alert::AlertSink>, deadline: Deadline) {
    match deps.runs.owed().await {
        Ok(owed) => {
            for run in owed {
                if !deadline.allows(crate::policy::MIN_CALL_WINDOW) {
                    return;
                }
                if let Err(e) = deps.record_run(&run).await {
                    tracing::warn!(run = %run, error = %e, "run record still not written");
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "owed run records unreadable"),
    }
    let Some(sink) = alerts else { return };
    let taken = match deps.runs.take_alerts(crate::policy::ALERTS_PER_PASS).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "run alerts unreadable");
            return;
        }
    };
    if taken.is_empty() {
        return;
    }
    let bound = deadline.cap(crate::policy::ALERT_TIMEOUT);
    let sent = tokio::time::timeout(bound, sink.runs_incomplete(&deps.cfg.app_env, &taken)).await;
    if !matches!(sent, Ok(Ok(()))) {
        tracing::error!(
            runs = taken.len(),
            "run discrepancy alert not delivered; kept for the next pass"
        );
        if let Err(e) = deps.runs.alerts_undelivered(&taken).await {
            tracing::error!(error = %e, "run alerts could not be kept");
        }
    }
}
