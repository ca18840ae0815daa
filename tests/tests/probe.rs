//! `lawsync probe` as a user runs it: the real binary against the law.go.kr look-alike over
//! HTTP, its gate on real Redis; and the probe in-process for its budget. Every run's
//! stdout and stderr are searched for the key.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use lawsync::config::Config;
use lawsync::policy::PROBE_BUDGET;
use lawsync::probe::{ProbeOptions, Verdict};
use lawsync::{Gate, LawClient, Secret};
use lawsync_tests::lookalike::{Beyond, Corpus, Lookalike, LookalikeConfig, PageLimit, Quirks, raw_request};
use lawsync_tests::servers::{LawsyncEnv, Topology, unique_env, unique_ns, unique_oc, workspace_bin};
use serde_json::Value;

const OC: &str = "oc-SECRET-probe7730";
/// The gate's interval, and the look-alike's rule, which it keeps with a margin.
const INTERVAL_MS: u64 = 25;
const RULE: Duration = Duration::from_millis(15);

async fn lookalike(oc: &str, quirks: Quirks) -> Lookalike {
    let mut cfg = LookalikeConfig::new(oc);
    cfg.interval = Some(RULE);
    cfg.quirks = quirks;
    Lookalike::start(cfg).await.expect("look-alike")
}

/// The environment of a deployment, with `oc` as the key, against `up`.
fn env(up: &Lookalike, oc: &str) -> LawsyncEnv {
    LawsyncEnv::new(
        oc,
        &up.base_url,
        &Topology::Standalone.url(),
        &unique_env("probe"),
        INTERVAL_MS,
    )
}

/// Runs `lawsync probe ARGS`; returns (exit code, stdout, stderr) after checking that
/// neither stream carries the key.
async fn probe(env: &LawsyncEnv, args: &[&str]) -> (Option<i32>, String, String) {
    let mut argv = vec!["probe"];
    argv.extend_from_slice(args);
    let out = env
        .command(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("run lawsync probe");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains(OC),
            "the key reached the output of lawsync probe {args:?}: {text}"
        );
    }
    (out.status.code(), stdout, stderr)
}

/// The JSON report's finding for `check`.
fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|f| f["check"] == check))
        .unwrap_or_else(|| panic!("no {check} in the report: {report}"))
}

/// Checks the report's cost against what the look-alike saw: every request counted, and
/// never more than the budget.
fn assert_within_budget(report: &Value, up: &Lookalike) {
    let arrivals = up.arrivals().len() as u64;
    assert_eq!(report["requests"], arrivals, "requests counted: {report}");
    assert!(
        arrivals <= u64::from(PROBE_BUDGET),
        "{arrivals} requests, budget {PROBE_BUDGET}"
    );
    assert!(
        up.arrivals().iter().all(|a| a.status != 429),
        "a call broke the rule: {:?}",
        up.arrivals()
    );
}

#[tokio::test]
async fn against_the_default_lookalike_every_assumption_holds() {
    let oc = unique_oc(OC);
    let up = lookalike(&oc, Quirks::default()).await;
    let (code, stdout, stderr) = probe(&env(&up, &oc), &["--json"]).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    for check in [
        "page_size",
        "single_hit",
        "paging_depth",
        "total_stable",
        "undated",
        "spellings",
        "nts_detail",
    ] {
        assert_eq!(finding(&report, check)["verdict"], "ok", "{check}: {report}");
    }
    // The figures are the corpus's own.
    let corpus = Corpus::new(1);
    let listed = corpus.visible(None, None).len() as u64;
    let undated = corpus.undated(None).len() as i64;
    let paging = &finding(&report, "paging_depth")["figures"];
    assert_eq!(paging["totalCnt"], listed);
    assert_eq!(paging["deepestAnswered"], listed.div_ceil(100));
    assert_eq!(finding(&report, "undated")["figures"]["gap"], undated);
    let dates = &report["seen"]["listDates"];
    assert!(
        dates["9999.99.99"]["read"] == true && dates["(empty)"]["count"].as_u64() > Some(0),
        "{dates}"
    );
    assert_eq!(
        report["seen"]["detailDates"]["99999999"]["read"], true,
        "{report}"
    );
    assert_within_budget(&report, &up);

    // The same in words.
    let (code, text, _) = probe(&env(&up, &oc), &[]).await;
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("[ok] paging_depth: the last page"), "{text}");
    assert!(text.contains("every assumption checked holds"), "{text}");
}

#[tokio::test]
async fn a_paging_limit_is_found_named_and_ends_with_its_exit_status() {
    let oc = unique_oc(OC);
    let limit = |depth, beyond| Quirks {
        page_limit: Some(PageLimit { depth, beyond }),
        ..Quirks::default()
    };
    let up = lookalike(&oc, limit(3, Beyond::NoHits)).await;
    let (code, stdout, stderr) = probe(&env(&up, &oc), &["--json"]).await;
    assert_eq!(code, Some(6), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("1 assumption differs") && stderr.contains("paging_depth"),
        "{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    let paging = finding(&report, "paging_depth");
    assert_eq!(paging["verdict"], "differs", "{paging}");
    assert_eq!(paging["figures"]["deepestAnswered"], 3, "{paging}");
    assert_eq!(paging["figures"]["firstRefused"], 4, "{paging}");
    let evidence = paging["evidence"].as_str().unwrap_or_default();
    assert!(
        evidence.contains("paging stops after page 3: page 4 answered with no hits"),
        "{evidence}"
    );
    // The rest still holds: a limit on paging is not mistaken for anything else.
    for check in ["page_size", "total_stable", "undated", "spellings", "nts_detail"] {
        assert_eq!(finding(&report, check)["verdict"], "ok", "{check}: {report}");
    }
    assert_within_budget(&report, &up);

    // A limit that answers with an error is found as well, and named in words.
    up.set_quirks(limit(5, Beyond::Error)).expect("quirks");
    let before = up.arrivals().len();
    let (code, text, _) = probe(&env(&up, &oc), &[]).await;
    assert_eq!(code, Some(6), "{text}");
    assert!(
        text.contains("[differs] paging_depth: paging stops after page 5: page 6 answered with an error (law.go.kr call failed: HTTP 400"),
        "{text}"
    );
    assert!(up.arrivals().len() - before <= PROBE_BUDGET as usize);
}

#[tokio::test]
async fn a_total_that_moves_with_the_page_is_reported() {
    let oc = unique_oc(OC);
    let quirks = Quirks {
        unstable_total: true,
        ..Quirks::default()
    };
    let up = lookalike(&oc, quirks).await;
    let (code, stdout, _) = probe(
        &env(&up, &oc),
        &["--json", "--from", "20250101", "--to", "20251231"],
    )
    .await;
    assert_eq!(code, Some(6), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    assert_eq!(report["window"], "20250101~20251231");
    let stable = finding(&report, "total_stable");
    assert_eq!(stable["verdict"], "differs", "{stable}");
    assert!(
        stable["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("totalCnt moved")),
        "{stable}"
    );
}

#[tokio::test]
async fn a_rejected_key_checks_nothing_and_says_so() {
    let up = lookalike(&unique_oc(OC), Quirks::default()).await;
    // Another key than the one law.go.kr knows: the reply echoes it, the output must not.
    let (code, stdout, stderr) = probe(&env(&up, &unique_oc(OC)), &[]).await;
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("law.go.kr did not answer the probe's first search, so nothing was checked: law.go.kr refused the key")
            && stderr.contains("EgressIp"),
        "{stderr}"
    );
    assert_eq!(up.arrivals().len(), 1, "one call, then nothing more");
}

#[tokio::test]
async fn bad_flags_exit_2_before_anything_is_asked() {
    let oc = unique_oc(OC);
    let up = lookalike(&oc, Quirks::default()).await;
    let env = env(&up, &oc);
    for (args, says) in [
        (
            &["--from", "20251301", "--to", "20251231"][..],
            "--from must be a date as YYYYMMDD: its month is not 01-12",
        ),
        (
            &["--from", "20250101", "--to", "2025-12-31"][..],
            "--to must be a date as YYYYMMDD: not 8 ASCII digits",
        ),
        (
            &["--from", "20251231", "--to", "20250101"][..],
            "--from 20251231 is after --to 20250101",
        ),
        (&["--from", "20250101"][..], "--to <TO>"),
        (&["--budget", "9"][..], "unexpected argument '--budget'"),
    ] {
        let (code, stdout, stderr) = probe(&env, args).await;
        assert_eq!(code, Some(2), "{args:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(
        up.arrivals().is_empty(),
        "a usage error called law.go.kr: {:?}",
        up.arrivals()
    );
}

#[tokio::test]
async fn no_call_starts_that_the_budget_cannot_pay_for() {
    let oc = unique_oc(OC);
    let up = lookalike(&oc, Quirks::default()).await;
    let cfg = Config::from_lookup(|k| match k {
        "LAW_API_OC" => Some(oc.clone()),
        "LAW_API_BASE_URL" => Some(up.base_url.clone()),
        "LAW_API_REQUEST_INTERVAL_MS" => Some(INTERVAL_MS.to_string()),
        _ => None,
    })
    .expect("config");
    let gate = Arc::new(Gate::new(
        Topology::Standalone.connect().await,
        &unique_ns("probe"),
        cfg.gate,
    ));
    let client = LawClient::new(&cfg.law, Secret::new(oc.clone()), gate).expect("client");
    let budget = 8;
    let opts = ProbeOptions {
        window: ("20250101".into(), "20251231".into()),
        today: "20261202".into(),
        max_attempts: cfg.law.max_attempts,
        budget,
        format: cfg.law.format,
    };
    let report = lawsync::probe::run(client, &opts).await.expect("a report");
    // Three attempts a call: a call starts only while 3 more requests fit in 8.
    assert_eq!(report.requests, up.arrivals().len() as u32);
    assert!(report.requests <= budget && report.calls == 6, "{report:?}");
    let spent: Vec<_> = report
        .checks
        .iter()
        .filter(|f| {
            f.verdict == Verdict::CouldNotCheck && f.evidence.contains("budget of 8 requests is spent")
        })
        .collect();
    assert!(!spent.is_empty(), "{:#?}", report.checks);
    assert!(!format!("{report:?}").contains(&oc));
}

#[tokio::test]
async fn the_lookalike_takes_its_quirks_at_start_and_at_run_time_and_refuses_bad_ones() {
    let up = lookalike(&unique_oc(OC), Quirks::default()).await;
    let post = |body: &'static str| raw_request(&up.base_url, "POST", "/_control/quirks", &[], body);
    let reply = post(r#"{"pageLimit":{"depth":2,"beyond":"error"},"unstableTotal":true}"#)
        .await
        .expect("post");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let now = raw_request(&up.base_url, "GET", "/_control/quirks", &[], "")
        .await
        .expect("get");
    assert!(
        now.contains(r#""depth":2"#) && now.contains(r#""unstableTotal":true"#),
        "{now}"
    );
    for (body, says) in [
        (
            r#"{"pageLimit":{"depth":0}}"#,
            "pageLimit.depth: must be 1 or more",
        ),
        (
            r#"{"pageLimit":{"depth":3,"beyond":"maybe"}}"#,
            "unknown variant `maybe`",
        ),
        (r#"{"pagelimit":null}"#, "unknown field `pagelimit`"),
    ] {
        let reply = post(body).await.expect("post");
        assert!(
            reply.starts_with("HTTP/1.1 400") && reply.contains(says),
            "{body}: {reply}"
        );
    }
    // A refused change changed nothing; in-process, the same check.
    let still = raw_request(&up.base_url, "GET", "/_control/quirks", &[], "")
        .await
        .expect("get");
    assert!(still.contains(r#""depth":2"#), "quirks moved: {still}");
    let zero = Quirks {
        page_limit: Some(PageLimit {
            depth: 0,
            beyond: Beyond::NoHits,
        }),
        ..Quirks::default()
    };
    assert_eq!(
        up.set_quirks(zero),
        Err("quirks: pageLimit.depth: must be 1 or more".into())
    );
    assert_eq!(up.set_quirks(Quirks::default()), Ok(()));
    let cleared = raw_request(&up.base_url, "GET", "/_control/quirks", &[], "")
        .await
        .expect("get");
    assert!(
        cleared.contains(r#"{"pageLimit":null,"refuseJson":false,"refuseXml":false,"unstableTotal":false}"#),
        "{cleared}"
    );

    // The program's flags: a limit of 0, or an error mode without a limit, are usage errors.
    for (args, says) in [
        (
            &["--page-limit", "0"][..],
            "--page-limit: a page number from 1, got 0",
        ),
        (
            &["--page-limit-error"][..],
            "--page-limit-error needs --page-limit D",
        ),
    ] {
        let out = tokio::process::Command::new(workspace_bin("law-lookalike"))
            .args(["--oc", "k", "--quiet"])
            .args(args)
            .output()
            .await
            .expect("run law-lookalike");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// Which formats the key is served: a key refused JSON is reported so, and passes with
/// `auto`; set to JSON only, the probe says it differs and what to set. Neither call of
/// the check opens the key-health circuit: the probe reports, it does not steer.
#[tokio::test]
async fn the_formats_the_key_is_served_are_reported_and_steer_nothing() {
    let oc = unique_oc(OC);
    let up = lookalike(
        &oc,
        Quirks {
            refuse_json: true,
            ..Quirks::default()
        },
    )
    .await;
    let env = env(&up, &oc);
    let (code, stdout, stderr) = probe(&env, &["--json"]).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    let formats = finding(&report, "formats");
    assert_eq!(formats["verdict"], "ok", "{formats}");
    assert_eq!(
        (
            formats["figures"]["json"].clone(),
            formats["figures"]["xml"].clone()
        ),
        (Value::from("not_applied"), Value::from("served")),
        "{formats}"
    );
    assert_eq!(
        report["keyCircuit"],
        Value::Null,
        "the probe opened the circuit: {report}"
    );
    assert_within_budget(&report, &up);

    let json_only = env.clone().set("LAW_API_FORMAT", "json");
    let (code, _, stderr) = probe(&json_only, &["--json"]).await;
    assert_eq!(
        code,
        Some(3),
        "a key refused its only format is the set-up's: {stderr}"
    );
    assert!(stderr.contains("LAW_API_FORMAT=auto"), "{stderr}");
}

/// The key-health circuit and the replies of no known shape, as an operator sees them:
/// `lawsync gate status` names the circuit's cause and fix; `lawsync probe` shows the
/// replies kept, the key masked.
#[tokio::test]
async fn gate_status_shows_the_circuit_and_probe_the_replies_of_no_known_shape() {
    let oc = unique_oc(OC);
    let up = lookalike(&oc, Quirks::default()).await;
    let env = env(&up, &oc);
    // A function of this stack met an unregistered address, and a page nobody knows.
    let cfg = Config::from_lookup(|k| env.get(k).map(str::to_owned)).expect("config");
    let redis = lawsync::RedisConn::connect(&cfg.redis).await.expect("redis");
    let ns = lawsync::Namespace::new(&cfg.app_env, lawsync::law::UPSTREAM).expect("ns");
    let gate = lawsync::app::law_gate(redis, &Secret::new(oc.clone()), &ns, cfg.gate).expect("gate");
    let health = lawsync::key_health::KeyHealth::beside(gate.connection().clone(), gate.key());
    health
        .refused(
            &lawsync::law::KeyProblem::VerifyFailed,
            lawsync::law::Endpoint::Search,
            &gate,
            Duration::from_secs(300),
        )
        .await
        .expect("refused");
    let page = format!("<html><body>접근이 제한되었습니다 OC={oc}</body></html>");
    let kept = lawsync::key_health::UnknownReply::of(
        "detail",
        lawsync::law::Format::Json,
        page.as_bytes(),
        "an HTML page of no known shape",
        &Secret::new(oc.clone()),
    );
    health.keep_unknown(&kept).await.expect("kept");

    let out = env
        .command(&["gate", "status"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("gate status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("key-health circuit: OPEN")
            && text.contains("auth_rejected")
            && text.contains("EgressIp"),
        "{text}"
    );
    assert!(!text.contains(&oc));
    let out = env
        .command(&["gate", "status", "--json"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("gate status --json");
    let status: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(status["keyCircuit"]["reason"], "auth_rejected", "{status}");

    // The probe shows what was kept (with the circuit and its hold cleared for its run, as
    // an operator's fix and five minutes would).
    let _: () = redis::cmd("DEL")
        .arg(health.key())
        .arg(gate.key())
        .query_async(&mut gate.connection().clone())
        .await
        .expect("del");
    let (code, text, stderr) = probe(&env, &[]).await;
    assert_eq!(code, Some(0), "{text}\n{stderr}");
    assert!(
        text.contains("1 reply of no known shape kept") && text.contains("접근이 제한되었습니다 OC=***"),
        "{text}"
    );
}
