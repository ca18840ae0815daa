//! The schedules against the look-alike publishing late (issue 15): day by day, the daily
//! schedule's probes store what law.go.kr publishes late after its decision, and what it
//! publishes without a decision date, on the day it is first listed; the seed's design
//! (a search of the day before, each day) never lists them. The calls each design costs,
//! and the share of the corpus it holds, are measured and printed (`--nocapture`). Then:
//! a weekly sweep fetches a revised precedent again and counts it as revised, and a daily
//! firing delivered twice is one run.
//!
//! Each rig has its own look-alike (the same seed, so the same corpus), namespace, queues
//! and folder; the look-alike's "today" is moved by hand and each firing is pumped until
//! its run is complete.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use lawsync::app::schedule::ScheduleKind;
use lawsync::law::SearchRequest;
use lawsync::law::calendar::{day_number, yyyymmdd};
use lawsync::mirror::runs::{RunId, RunStatus};
use lawsync::policy::{DAILY_PROBE_MONTHS, DAILY_RECENT_MONTHS};
use lawsync_tests::lookalike::{Corpus, Precedent};
use lawsync_tests::mirror::{MirrorRig, Pumped, Queues, Store};

/// The corpus: seed 1 publishes an undated precedent on 2023-04-02.
const SEED: u64 = 1;
/// The look-alike's today when the mirror is first filled: three years and a bit of the
/// corpus (about 1,200 precedents) are out, so a few are published more than the probed
/// months late.
const START: &str = "20230320";
/// Days simulated after [`START`], one firing each: three weeks, across a month's end.
const DAYS: i64 = 21;

fn shift(day: &str, by: i64) -> String {
    yyyymmdd(day_number(day).expect("a day") + by)
}

/// `hh:00` UTC on the day before `day`, RFC 3339: the schedules fire at 04:00 (daily) and
/// 03:00 (sweep) KST, which is 19:00 and 18:00 UTC the day before.
fn utc_before(day: &str, hour: u32) -> String {
    let d = shift(day, -1);
    format!("{}-{}-{}T{hour:02}:00:00Z", &d[..4], &d[4..6], &d[6..])
}

fn daily_at(day: &str) -> String {
    utc_before(day, 19)
}

fn sweep_at(day: &str) -> String {
    utc_before(day, 18)
}

/// Pumps the queues and runs the drainer until `run` is complete and nothing is left to do.
async fn settle(rig: &MirrorRig, run: &RunId) -> RunStatus {
    let started = Instant::now();
    loop {
        let pumped = rig.pump().await;
        let status = rig.status(run).await;
        if status.completed_ms.is_some() && pumped == Pumped::default() {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "run {run} never completed: {status:?}"
        );
        rig.drain(1).await;
    }
}

/// The ids stored under `prec/` or recorded under `missing/`.
async fn held_ids(rig: &MirrorRig) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for prefix in ["prec/", "missing/"] {
        for key in rig.keys(prefix).await {
            let id = key
                .strip_prefix(prefix)
                .and_then(|k| k.strip_suffix(".json"))
                .and_then(|k| k.parse().ok())
                .unwrap_or_else(|| panic!("a key that is not {prefix}{{id}}.json: {key}"));
            out.insert(id);
        }
    }
    out
}

/// The run that stored `p` (its envelope's `runId`, or its missing marker's).
async fn stored_by(rig: &MirrorRig, p: &Precedent) -> Option<String> {
    let dir = if p.detail_missing { "missing" } else { "prec" };
    let doc = rig.json(&format!("{dir}/{}.json", p.id)).await;
    doc["runId"].as_str().map(str::to_owned)
}

fn ids(ps: &[Precedent]) -> BTreeSet<u64> {
    ps.iter().map(|p| p.id).collect()
}

/// First day of the month `back` months before `day`'s.
fn month_start(day: &str, back: i64) -> String {
    let (y, m): (i64, i64) = (day[..4].parse().expect("year"), day[4..6].parse().expect("month"));
    let n = y * 12 + (m - 1) - back;
    format!("{:04}{:02}01", n.div_euclid(12), n.rem_euclid(12) + 1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    /// The seed's: a search of the day before, each day.
    DayBefore,
    /// lawsync's daily schedule: recent months in full, month probes, the whole-list probe.
    Daily,
    /// The whole list, every page, each day.
    SweepDaily,
}

impl Design {
    fn name(self) -> &'static str {
        match self {
            Design::DayBefore => "day before (the seed's)",
            Design::Daily => "daily probes (lawsync)",
            Design::SweepDaily => "full sweep every day",
        }
    }
}

/// What one design did over the simulated days.
struct Simulated {
    design: Design,
    rig: MirrorRig,
    /// The run of each simulated day.
    runs: BTreeMap<String, RunId>,
    search: usize,
    detail: usize,
    held: BTreeSet<u64>,
    seconds: f64,
}

/// Copies the folder `from` into `to` (precedents, markers and the index; not the runs).
fn copy_store(from: &Path, to: &Path) {
    fn walk(dir: &Path, from: &Path, to: &Path) {
        for e in std::fs::read_dir(dir).expect("read dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(from).expect("under the folder");
            if p.is_dir() {
                walk(&p, from, to);
            } else if ["prec", "missing", "index"].iter().any(|d| rel.starts_with(d)) {
                let dest = to.join(rel);
                std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
                std::fs::copy(&p, &dest).expect("copy");
            }
        }
    }
    walk(from, from, to);
}

/// A rig for `design` holding everything listed on [`START`]: lawsync's by its own daily
/// firing on an empty mirror (which reads every month and then the whole list); the others
/// from a copy of that store, their Redis cache warmed by a sweep that must fetch nothing.
async fn filled(design: Design, from: Option<&MirrorRig>) -> MirrorRig {
    let rig = MirrorRig::start_with(Store::Folder, Queues::Memory, SEED, Some(START)).await;
    let corpus = Corpus::new(SEED);
    let t = Instant::now();
    let fill = match from {
        None => rig.fire(ScheduleKind::Daily, &daily_at(START)).await,
        Some(other) => {
            copy_store(
                other.folder.as_deref().expect("a folder"),
                rig.folder.as_deref().expect("a folder"),
            );
            rig.fire(ScheduleKind::Sweep, &sweep_at(START)).await
        }
    };
    settle(&rig, &fill).await;
    let (_, details) = rig.calls_since(0);
    eprintln!(
        "{}: filled by {fill} in {:.1} s, {details} detail calls",
        design.name(),
        t.elapsed().as_secs_f64()
    );
    if from.is_some() {
        assert_eq!(details, 0, "a cold cache over a full store costs no detail call");
    }
    assert_eq!(
        held_ids(&rig).await,
        ids(&corpus.visible(None, Some(START))),
        "{}: {fill} holds everything listed on {START}",
        design.name()
    );
    rig
}

/// Runs `design` on each of the [`DAYS`] days after [`START`], counting the look-alike's
/// calls from the first day on.
async fn simulate(design: Design, rig: MirrorRig) -> Simulated {
    let since = rig.arrivals_len();
    let clock = Instant::now();
    let mut runs = BTreeMap::new();
    for i in 1..=DAYS {
        let today = shift(START, i);
        rig.lookalike.set_today(Some(&today)).expect("today");
        let run = match design {
            Design::DayBefore => {
                let d = shift(&today, -1);
                rig.sync(SearchRequest {
                    from: d.clone(),
                    to: d,
                    ..Default::default()
                })
                .await
            }
            Design::Daily => rig.fire(ScheduleKind::Daily, &daily_at(&today)).await,
            Design::SweepDaily => rig.fire(ScheduleKind::Sweep, &daily_at(&today)).await,
        };
        let status = settle(&rig, &run).await;
        assert_eq!(
            status.counts.get("dead").copied().unwrap_or(0),
            0,
            "{}: {run} dead-lettered ids",
            design.name()
        );
        runs.insert(today, run);
    }
    let seconds = clock.elapsed().as_secs_f64();
    let (search, detail) = rig.calls_since(since);
    let held = held_ids(&rig).await;
    Simulated {
        design,
        rig,
        runs,
        search,
        detail,
        held,
        seconds,
    }
}

/// `n/of (p %)`.
fn share(n: usize, of: usize) -> String {
    if of == 0 {
        return "-".to_owned();
    }
    format!("{n}/{of} ({:.1} %)", 100.0 * n as f64 / of as f64)
}

/// Issue 15: the daily probes hold everything law.go.kr lists, each precedent from the day
/// it is first listed, late or undated; the day before misses every late publication. The
/// three designs' calls and holdings over the same days are printed as a table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_probes_store_late_and_undated_publications_the_day_before_misses() {
    let corpus = Corpus::new(SEED);
    let end = shift(START, DAYS);
    let visible = corpus.visible(None, Some(&end));
    let expected = ids(&visible);
    // What was published during the simulated days: the news each design must find.
    let news: Vec<Precedent> = visible
        .iter()
        .filter(|p| p.published.as_str() > START)
        .cloned()
        .collect();
    // Late: decided before the months a day's firing reads in full (its own and the one
    // before), so only a month probe or the whole-list probe finds it.
    let late: Vec<&Precedent> = news
        .iter()
        .filter(|p| {
            !p.is_undated() && p.decided < month_start(&p.published, i64::from(DAILY_RECENT_MONTHS) - 1)
        })
        .collect();
    // Beyond the probed months: only the whole-list probe finds it.
    let horizon = i64::from(DAILY_RECENT_MONTHS + DAILY_PROBE_MONTHS) - 1;
    let beyond: Vec<&&Precedent> = late
        .iter()
        .filter(|p| p.decided < month_start(&p.published, horizon))
        .collect();
    let undated: Vec<&Precedent> = news.iter().filter(|p| p.is_undated()).collect();
    let revised: Vec<&Precedent> = visible
        .iter()
        .filter(|p| {
            p.revision
                .as_ref()
                .is_some_and(|r| r.on.as_str() > START && r.on <= end && p.published.as_str() <= START)
        })
        .collect();
    assert!(
        !late.is_empty() && !undated.is_empty(),
        "the corpus publishes late and undated in these days"
    );

    let wall = Instant::now();
    let lawsync = filled(Design::Daily, None).await;
    let (seed, every) = tokio::join!(
        filled(Design::DayBefore, Some(&lawsync)),
        filled(Design::SweepDaily, Some(&lawsync))
    );
    let (day_before, daily, sweep) = tokio::join!(
        simulate(Design::DayBefore, seed),
        simulate(Design::Daily, lawsync),
        simulate(Design::SweepDaily, every)
    );
    let wall = wall.elapsed();

    // Every design holds only what is listed.
    for s in [&day_before, &daily, &sweep] {
        let extra: Vec<_> = s.held.difference(&expected).collect();
        assert!(
            extra.is_empty(),
            "{} holds ids never listed: {extra:?}",
            s.design.name()
        );
    }

    // lawsync: everything listed by the last day is held...
    let unheld: Vec<_> = expected.difference(&daily.held).collect();
    assert!(
        unheld.is_empty(),
        "the daily probes left {} listed ids unheld: {unheld:?}",
        unheld.len()
    );
    // ...each stored by the run of the day it was first listed: late, undated or not.
    let mut wrong_day = Vec::new();
    for p in &news {
        let want = daily.runs.get(&p.published).map(RunId::as_str);
        let got = stored_by(&daily.rig, p).await;
        if got.as_deref() != want {
            wrong_day.push(format!(
                "{} (decided {:?}, published {}): stored by {got:?}, want {want:?}",
                p.id, p.decided, p.published
            ));
        }
    }
    assert!(
        wrong_day.is_empty(),
        "not stored on the day they were first listed:\n{}",
        wrong_day.join("\n")
    );
    for p in &undated {
        let by = stored_by(&daily.rig, p).await.expect("a run stored it");
        assert!(by.starts_with("daily-"), "undated {} stored by {by}", p.id);
    }

    // The full sweep sees the same.
    assert_eq!(sweep.held, expected, "a sweep every day holds everything listed");

    // The day before: a strict subset, missing every late publication and every undated one.
    assert!(
        day_before.held.is_subset(&daily.held) && day_before.held.len() < daily.held.len(),
        "the day before holds strictly less"
    );
    let missed = |ps: &[&Precedent]| ps.iter().filter(|p| !day_before.held.contains(&p.id)).count();
    assert_eq!(
        missed(&late),
        late.len(),
        "the day before lists no late publication"
    );
    assert_eq!(
        missed(&undated),
        undated.len(),
        "the day before lists no undated one"
    );

    // The table.
    let news_ids = ids(&news);
    let mut rows = Vec::new();
    for s in [&day_before, &daily, &sweep] {
        let held = |ps: &[&Precedent]| ps.iter().filter(|p| s.held.contains(&p.id)).count();
        let mut current = 0;
        for p in &revised {
            if p.detail_missing || !s.held.contains(&p.id) {
                continue;
            }
            let env = s.rig.json(&format!("prec/{}.json", p.id)).await;
            if env["listing"]["사건명"] == p.case_name_on(Some(&end))
                && env["listing"]["판결유형"] == p.judgment_type_on(Some(&end))
            {
                current += 1;
            }
        }
        let revisable = revised.iter().filter(|p| !p.detail_missing).count();
        rows.push(format!(
            "{:<26} {:>6} {:>7.1} {:>7} {:>18} {:>16} {:>11} {:>9} {:>9} {:>10} {:>6.1}",
            s.design.name(),
            s.search,
            s.search as f64 / DAYS as f64,
            s.detail,
            share(s.held.len(), expected.len()),
            share(s.held.intersection(&news_ids).count(), news.len()),
            share(held(&late), late.len()),
            share(
                held(&beyond.iter().map(|p| **p).collect::<Vec<_>>()),
                beyond.len()
            ),
            share(held(&undated), undated.len()),
            share(current, revisable),
            s.seconds,
        ));
    }
    let header = format!(
        "{:<26} {:>6} {:>7} {:>7} {:>18} {:>16} {:>11} {:>9} {:>9} {:>10} {:>6}",
        "design",
        "search",
        "a day",
        "detail",
        "held / listed",
        "new held",
        "late",
        ">36 mo",
        "undated",
        "revised",
        "secs"
    );
    eprintln!(
        "\n{DAYS} days after {START} (seed {SEED}: {} precedents listed on {end}, {} published in these days, \
         of them {} late (decided before the two recent months), {} of them beyond the {} probed months, {} undated; \
         {} older ones revised). Calls from the first day on; the first filling is not counted.\n{header}\n{}\n\
         (filled once, copied twice; the three designs run at once: {:.1} s of wall time)\n",
        expected.len(),
        news.len(),
        late.len(),
        beyond.len(),
        DAILY_RECENT_MONTHS + DAILY_PROBE_MONTHS,
        undated.len(),
        revised.len(),
        rows.join("\n"),
        wall.as_secs_f64()
    );
}

/// The first Sunday from `from` whose week (Monday to Sunday) revises a precedent listed
/// before it, with those precedents.
fn week_with_revisions(corpus: &Corpus, from: &str) -> (String, Vec<Precedent>) {
    let mut day = day_number(from).expect("day");
    while (day + 3).rem_euclid(7) != 6 {
        day += 1;
    }
    for _ in 0..52 {
        let (sunday, before) = (yyyymmdd(day), yyyymmdd(day - 7));
        let revised: Vec<Precedent> = corpus
            .visible(None, Some(&before))
            .into_iter()
            .filter(|p| {
                p.revision
                    .as_ref()
                    .is_some_and(|r| r.on > before && r.on <= sunday)
            })
            .collect();
        if revised.iter().any(|p| !p.detail_missing) {
            return (sunday, revised);
        }
        day += 7;
    }
    panic!("no week of a year from {from} revises a precedent");
}

/// A weekly sweep fetches again a precedent whose list metadata changed since the last
/// sweep, stores the revised listing and detail, and counts it as revised; what is held
/// unchanged is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weekly_sweep_stores_a_revised_precedent_again_and_counts_it_revised() {
    let corpus = Corpus::new(SEED);
    // A small corpus (2020) keeps the sweeps short.
    let (sunday, revised) = week_with_revisions(&corpus, "20200601");
    let before = shift(&sunday, -7);
    let rig = MirrorRig::start_with(Store::Folder, Queues::Memory, SEED, Some(&before)).await;
    let first = rig.fire(ScheduleKind::Sweep, &sweep_at(&before)).await;
    settle(&rig, &first).await;
    let old = corpus.visible(None, Some(&before));
    assert_eq!(held_ids(&rig).await, ids(&old));

    rig.lookalike.set_today(Some(&sunday)).expect("today");
    let since = rig.arrivals_len();
    let run = rig.fire(ScheduleKind::Sweep, &sweep_at(&sunday)).await;
    assert_eq!(run.as_str(), format!("sweep-{}T180000Z", shift(&sunday, -1)));
    settle(&rig, &run).await;

    let now = corpus.visible(None, Some(&sunday));
    let new: Vec<&Precedent> = now.iter().filter(|p| p.published > before).collect();
    // A precedent recorded missing is not asked again within a month, revised or not.
    let refetched: Vec<&Precedent> = revised.iter().filter(|p| !p.detail_missing).collect();
    let record = rig.json(&format!("runs/{run}.json")).await;
    let n = |k: &str| {
        record["ids"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("ids.{k}: {record}")) as usize
    };
    assert_eq!(record["complete"], true, "{record}");
    assert_eq!(record["discrepancies"], serde_json::json!([]), "{record}");
    assert_eq!(n("seen"), now.len(), "{record}");
    assert_eq!(n("revised"), refetched.len(), "{record}");
    assert_eq!(n("added") + n("missing"), new.len(), "{record}");
    assert_eq!(n("unchanged"), 0, "{record}");
    assert_eq!(n("skipped"), old.len() - refetched.len(), "{record}");
    let (_, details) = rig.calls_since(since);
    assert_eq!(
        details,
        new.len() + refetched.len(),
        "one detail call per new or revised precedent"
    );

    for p in &refetched {
        let env = rig.json(&format!("prec/{}.json", p.id)).await;
        assert_eq!(env["runId"], run.as_str(), "{}", p.id);
        assert_eq!(
            env["listing"]["사건명"],
            p.case_name_on(Some(&sunday)),
            "{}",
            p.id
        );
        assert_eq!(
            env["listing"]["판결유형"],
            p.judgment_type_on(Some(&sunday)),
            "{}",
            p.id
        );
        assert_eq!(env["detail"], p.detail_on(Some(&sunday)), "{}", p.id);
    }
    // The feed says so.
    let feed = record["feed"][0].as_str().expect("a feed file");
    let lines: Vec<serde_json::Value> = rig
        .text(feed)
        .await
        .lines()
        .map(|l| serde_json::from_str(l).expect("a feed line"))
        .collect();
    let revised_lines: BTreeSet<String> = lines
        .iter()
        .filter(|l| l["change"] == "revised")
        .map(|l| l["id"].as_str().expect("id").to_owned())
        .collect();
    let want: BTreeSet<String> = refetched.iter().map(|p| p.id.to_string()).collect();
    assert_eq!(revised_lines, want);
    eprintln!(
        "sweep {run}: {} listed, {} revised in the week ({} refetched), {} new",
        now.len(),
        revised.len(),
        refetched.len(),
        new.len()
    );
}

/// EventBridge delivers at least once: the same daily firing twice is one run, each id
/// counted once and fetched once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_firing_delivered_twice_is_one_run_counted_once() {
    let corpus = Corpus::new(SEED);
    let today = "20200420";
    let rig = MirrorRig::start_with(Store::Folder, Queues::Memory, SEED, Some(today)).await;
    let at = daily_at(today);
    let a = rig.fire(ScheduleKind::Daily, &at).await;
    let b = rig.fire(ScheduleKind::Daily, &at).await;
    assert_eq!(a, b, "a repeated delivery names the same run");
    assert_eq!(a.as_str(), "daily-20200419T190000Z");
    let status = settle(&rig, &a).await;
    let listed = corpus.visible(None, Some(today));
    assert_eq!(
        status.ids_seen as usize,
        listed.len(),
        "ids seen = distinct ids listed: {status:?}"
    );
    let (search, details) = rig.calls_since(0);
    assert_eq!(details, listed.len(), "each id fetched once");
    assert_eq!(held_ids(&rig).await, ids(&listed));
    let records = rig.keys("runs/").await;
    assert_eq!(records, vec![format!("runs/{a}.json")], "one run, one record");
    let record = rig.json(&records[0]).await;
    assert_eq!(record["complete"], true, "{record}");
    assert_eq!(record["ids"]["seen"], listed.len(), "{record}");
    let settled = ["added", "missing", "skipped"]
        .iter()
        .map(|k| record["ids"][k].as_u64().expect("count"))
        .sum::<u64>();
    assert_eq!(settled as usize, listed.len(), "{record}");
    // The feed has each id once.
    let mut lines = Vec::new();
    for f in record["feed"].as_array().expect("feed") {
        lines.extend(
            rig.text(f.as_str().expect("key"))
                .await
                .lines()
                .map(str::to_owned),
        );
    }
    let fed: BTreeSet<String> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("line")["id"].to_string())
        .collect();
    assert_eq!(fed.len(), lines.len(), "no id twice in the feed");
    assert_eq!(lines.len(), listed.len());

    // Delivered once more after it completed: still the same run, nothing fetched or added.
    let since = rig.arrivals_len();
    let c = rig.fire(ScheduleKind::Daily, &at).await;
    assert_eq!(c, a);
    settle(&rig, &c).await;
    let again = rig.status(&a).await;
    assert_eq!(again.ids_seen, status.ids_seen);
    assert_eq!(again.counts, status.counts);
    let (late_search, late_details) = rig.calls_since(since);
    assert_eq!(late_details, 0);
    assert_eq!(rig.keys("runs/").await.len(), 1);
    eprintln!(
        "daily {a} delivered twice: {} ids, {search} search calls and {details} detail calls; \
         a third delivery after it completed: {late_search} search calls, {late_details} detail calls",
        listed.len()
    );
}
