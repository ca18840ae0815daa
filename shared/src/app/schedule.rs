//! The schedules' runs: `{"schedule":"daily"|"sweep","at":"<instant>"}`, sent by
//! EventBridge Scheduler with its own scheduled time, so a late or repeated delivery is
//! the same run ([`RunId::for_firing`]).
//!
//! - **sweep** (weekly): the whole list, every page, undated precedents and revisions
//!   included. About 1,000 search calls for 100,000 precedents; held ones cost nothing
//!   more.
//! - **daily**: probes. Each of the last [`DAILY_RECENT_MONTHS`] months of decision dates
//!   is read in full (publications and revisions cluster there). Each of the
//!   [`DAILY_PROBE_MONTHS`] months before is asked for its `totalCnt` with one hit
//!   (`display=1`), and read in full only when law.go.kr lists more than the mirror holds
//!   for it. When every month has answered, one probe of the whole list compares its
//!   `totalCnt` with everything held: more not held than the months found means precedents
//!   without a decision date, or decided before the probed months, are new, and the whole
//!   list is read. See `docs/mirror.md` for the arithmetic.

use serde::Deserialize;

use super::Deps;
use super::jobs::JobError;
use super::outbox::QueueName;
use crate::law::calendar::{days_from_civil, days_in_month, yyyymmdd};
use crate::law::{LawError, Probe, SearchRequest};
use crate::mirror::runs::{RunId, RunPlan};
use crate::policy::{DAILY_PROBE_MONTHS, DAILY_RECENT_MONTHS};

/// Korea Standard Time, UTC+9.
const KST_OFFSET_MS: i64 = 9 * 3_600_000;

/// Which schedule fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    Daily,
    Sweep,
}

impl ScheduleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::Daily => "daily",
            ScheduleKind::Sweep => "sweep",
        }
    }
}

/// `{"schedule":"daily","at":"2026-12-01T19:00:00Z"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Firing {
    pub schedule: ScheduleKind,
    /// The schedule's own time (`<aws.scheduler.scheduled-time>`), RFC 3339.
    pub at: String,
}

/// What a firing starts: the run and the first messages of its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiringPlan {
    pub run: RunId,
    pub plan: RunPlan,
    /// Month probes the run starts with (the daily's).
    pub probes: u32,
    pub messages: Vec<SearchRequest>,
}

impl Firing {
    /// The firing's instant, epoch ms; a clear error naming `at` otherwise.
    pub fn at_ms(&self) -> Result<u64, LawError> {
        crate::law::schedule::parse_rfc3339(&self.at)
            .and_then(|s| u64::try_from(s).ok())
            .map(|s| s * 1000)
            .ok_or_else(|| {
                LawError::InvalidRequest(format!(
                    "at must be an RFC 3339 instant such as 2026-12-01T19:00:00Z (got {} characters that are not one)",
                    self.at.chars().count()
                ))
            })
    }

    /// The run this firing starts, and its first messages.
    pub fn plan(&self) -> Result<FiringPlan, LawError> {
        let at_ms = self.at_ms()?;
        let run = RunId::for_firing(self.schedule.as_str(), at_ms);
        match self.schedule {
            ScheduleKind::Sweep => Ok(FiringPlan {
                plan: RunPlan {
                    kind: "sweep".into(),
                    windows: vec!["all".into()],
                    query: None,
                    refresh: false,
                },
                probes: 0,
                messages: vec![SearchRequest {
                    all: true,
                    run: Some(run.clone()),
                    ..Default::default()
                }],
                run,
            }),
            ScheduleKind::Daily => {
                let today = (at_ms as i64 + KST_OFFSET_MS).div_euclid(86_400_000);
                let months = months_back(today, DAILY_RECENT_MONTHS + DAILY_PROBE_MONTHS);
                let mut messages = Vec::with_capacity(months.len());
                let mut windows = Vec::with_capacity(months.len() + 1);
                for (i, (from, to)) in months.into_iter().enumerate() {
                    let probe = if (i as u32) < DAILY_RECENT_MONTHS {
                        Probe::Recent
                    } else {
                        Probe::Month
                    };
                    let req = SearchRequest {
                        from,
                        to,
                        probe: Some(probe),
                        run: Some(run.clone()),
                        ..Default::default()
                    };
                    windows.push(probe_part(&req));
                    messages.push(req);
                }
                windows.push(probe_part(&all_probe(&run, false)));
                Ok(FiringPlan {
                    plan: RunPlan {
                        kind: "daily".into(),
                        windows,
                        query: None,
                        refresh: false,
                    },
                    probes: messages.len() as u32,
                    messages,
                    run,
                })
            }
        }
    }
}

/// The month windows (first day to last, the current one to `today`) of the `count`
/// months ending with `today`'s, newest first.
fn months_back(today: i64, count: u32) -> Vec<(String, String)> {
    let t = yyyymmdd(today);
    let (mut y, mut m): (i64, i64) = (t[..4].parse().unwrap_or(1970), t[4..6].parse().unwrap_or(1));
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let first = days_from_civil(y, m, 1);
        let last = if i == 0 {
            today
        } else {
            days_from_civil(y, m, days_in_month(y, m))
        };
        out.push((yyyymmdd(first), yyyymmdd(last)));
        if m == 1 {
            y -= 1;
            m = 12;
        } else {
            m -= 1;
        }
    }
    out
}

/// The run part a probe counts as: `probe:` and its window.
pub fn probe_part(req: &SearchRequest) -> String {
    format!("probe:{}", req.window_name())
}

/// The whole-list probe of `run`.
pub fn all_probe(run: &RunId, refresh: bool) -> SearchRequest {
    SearchRequest {
        all: true,
        probe: Some(Probe::All),
        run: Some(run.clone()),
        refresh,
        ..Default::default()
    }
}

/// Starts the run of `firing`: opens it (a repeated delivery finds it open and sends the
/// same messages again, which count once) and sends its first messages.
pub async fn start(deps: &Deps, firing: &Firing) -> Result<RunId, JobError> {
    let plan = firing.plan()?;
    let opened = deps
        .runs
        .open(&plan.run, &plan.plan, plan.probes, crate::clock::now_millis())
        .await
        .map_err(|e| JobError::Run(e.to_string()))?;
    send_searches(deps, &plan.messages).await?;
    tracing::info!(
        run = %plan.run,
        opened,
        messages = plan.messages.len(),
        schedule = firing.schedule.as_str(),
        "schedule: run started"
    );
    Ok(plan.run)
}

/// The retry-queue job of a firing that could not start: kind `SEARCH`, identity
/// `schedule:<kind>@<at>`, payload the firing.
pub fn firing_job(firing: &Firing) -> crate::queue::Job {
    crate::queue::Job::new(
        crate::queue::JobKind::Search,
        format!("schedule:{}@{}", firing.schedule.as_str(), firing.at),
        serde_json::to_value(firing).unwrap_or_default(),
    )
}

/// Sends search messages, all or an error.
pub async fn send_searches(deps: &Deps, reqs: &[SearchRequest]) -> Result<(), JobError> {
    if reqs.is_empty() {
        return Ok(());
    }
    let bodies = reqs
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| JobError::Fanout(e.to_string()))?;
    let failed = deps
        .outbox
        .send(QueueName::Search, &bodies)
        .await
        .map_err(|e| JobError::Fanout(e.to_string()))?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(JobError::Fanout(format!(
            "{} of {} search messages not sent",
            failed.len(),
            bodies.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daily_firing_probes_months_back_from_the_korean_day() {
        // 19:00 UTC on 30 Nov is 04:00 KST on 1 Dec.
        let f = Firing {
            schedule: ScheduleKind::Daily,
            at: "2026-11-30T19:00:00Z".into(),
        };
        let p = f.plan().expect("plan");
        assert_eq!(p.run.as_str(), "daily-20261130T190000Z");
        let n = (DAILY_RECENT_MONTHS + DAILY_PROBE_MONTHS) as usize;
        assert_eq!(p.messages.len(), n);
        assert_eq!(p.probes as usize, n);
        assert_eq!(
            p.plan.windows.len(),
            n + 1,
            "every month probe and the whole-list probe"
        );
        let first = &p.messages[0];
        assert_eq!((first.from.as_str(), first.to.as_str()), ("20261201", "20261201"));
        assert_eq!(first.probe, Some(Probe::Recent));
        let second = &p.messages[1];
        assert_eq!(
            (second.from.as_str(), second.to.as_str()),
            ("20261101", "20261130")
        );
        let older = &p.messages[DAILY_RECENT_MONTHS as usize];
        assert_eq!(older.probe, Some(Probe::Month));
        for m in &p.messages {
            m.params().expect("every probe is a valid request");
        }
        // A repeated delivery is the same run.
        assert_eq!(f.plan().expect("plan").run, p.run);
    }

    #[test]
    fn a_sweep_reads_the_whole_list() {
        let p = Firing {
            schedule: ScheduleKind::Sweep,
            at: "2026-11-29T18:00:00Z".into(),
        }
        .plan()
        .expect("plan");
        assert_eq!(p.messages.len(), 1);
        assert!(p.messages[0].all && p.messages[0].probe.is_none());
        assert!(
            !p.messages[0]
                .params()
                .expect("params")
                .iter()
                .any(|(k, _)| *k == "prncYd")
        );
    }

    #[test]
    fn a_bad_instant_names_the_field() {
        let e = Firing {
            schedule: ScheduleKind::Daily,
            at: "yesterday".into(),
        }
        .plan()
        .expect_err("bad");
        assert!(e.to_string().contains("at must be an RFC 3339 instant"), "{e}");
    }

    #[test]
    fn months_cross_year_ends() {
        let today = crate::law::calendar::day_number("20260215").expect("day");
        let m = months_back(today, 3);
        assert_eq!(
            m,
            vec![
                ("20260201".into(), "20260215".into()),
                ("20260101".into(), "20260131".into()),
                ("20251201".into(), "20251231".into()),
            ]
        );
    }
}
