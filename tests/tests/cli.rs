//! The `lawsync` command line as a user runs it: a real process, real Redis, moto, and a
//! local upstream. Its stdout and stderr are searched for the key.

use std::path::PathBuf;
use std::process::Stdio;

use lawsync_tests::servers::{LawsyncEnv, Topology, unique_env, unique_oc};
use lawsync_tests::upstream::{Reply, Upstream};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const OC: &str = "oc-SECRET-cli5521";

struct Env {
    env: LawsyncEnv,
    docs: PathBuf,
}

fn env(upstream: &Upstream, with_key: bool) -> Env {
    env_for(upstream, with_key, &unique_oc(OC))
}

/// A key of its own per test: the gate is the key's, and one test's cooldown must not
/// hold back another's calls.
fn env_for(upstream: &Upstream, with_key: bool, oc: &str) -> Env {
    let app_env = unique_env("cli");
    let docs = std::env::temp_dir().join(&app_env);
    let mut env = LawsyncEnv::new(oc, &upstream.base_url, &Topology::Standalone.url(), &app_env, 5)
        .set("DOCUMENT_DIR", docs.display().to_string())
        .set("RUST_LOG", "debug");
    // The default tolerance for a 5 ms interval (2 ms).
    env.unset("LAW_API_GATE_TOLERANCE_MS");
    if !with_key {
        env.unset("LAW_API_OC");
    }
    Env { env, docs }
}

/// Runs `lawsync ARGS` with `stdin`; returns (exit success, stdout, stderr), after
/// checking neither stream carries the key.
async fn lawsync(env: &Env, args: &[&str], stdin: &str) -> (bool, String, String) {
    let (code, stdout, stderr) = lawsync_exit(env, args, stdin).await;
    (code == Some(0), stdout, stderr)
}

/// [`lawsync`], with the exit code itself (`None` when a signal ended the process).
async fn lawsync_exit(env: &Env, args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    let mut child = env
        .env
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lawsync");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .await
        .expect("write stdin");
    let out = child.wait_with_output().await.expect("lawsync output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains(OC),
            "the key reached the output of lawsync {args:?}: {text}"
        );
    }
    (out.status.code(), stdout, stderr)
}

#[tokio::test]
async fn invoke_detail_reads_an_sqs_event_and_prints_the_batch_response() {
    let oc = unique_oc(OC);
    let doc = json!({ "PrecService": { "판례정보일련번호": "51", "사건명": "x", "판례내용": oc.clone() } })
        .to_string();
    let up = Upstream::start(vec![Reply::json(doc)], Reply::status(500)).await;
    let env = env_for(&up, true, &oc);
    let event = json!({ "Records": [
        { "messageId": "ok", "body": "{\"id\":\"51\"}" },
        { "messageId": "bad", "body": "not json" },
    ] })
    .to_string();
    let (ok, stdout, stderr) = lawsync(&env, &["invoke", "detail", "--event", "-"], &event).await;
    assert!(ok, "{stderr}");
    let response: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    // The invalid body is kept as a dead letter, not redelivered.
    assert_eq!(response, json!({ "batchItemFailures": [] }));
    let stored = std::fs::read_to_string(env.docs.join("prec/51.json")).expect("stored document");
    assert!(!stored.contains(OC));
    let (ok, stdout, _) = lawsync(&env, &["queue", "dead", "--json"], "").await;
    assert!(ok);
    let dead: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        dead[0]["id"],
        format!("{}:bad", lawsync::queue::JobKind::Invalid),
        "{dead}"
    );
    assert_eq!(dead[0]["job"]["payload"]["body"], "not json", "{dead}");
    let _ = std::fs::remove_dir_all(&env.docs);
}

/// A local run that names nothing of AWS (a folder store, no queue, no secret ARN) asks no
/// AWS source for anything: no region or credential lookup in the EC2 metadata service,
/// whose failed answers would otherwise be printed as warnings. The metadata endpoint is
/// a local server here, so a lookup is seen even where the real one would not answer.
#[tokio::test]
async fn a_local_run_without_aws_asks_no_metadata_service_and_prints_no_aws_noise() {
    let oc = unique_oc(OC);
    let doc =
        json!({ "PrecService": { "판례정보일련번호": "52", "사건명": "x", "판례내용": "y" } }).to_string();
    let up = Upstream::start(vec![Reply::json(doc)], Reply::status(500)).await;
    let imds = Upstream::start(vec![], Reply::status(404)).await;
    let mut env = env_for(&up, true, &oc);
    for var in [
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "RUST_LOG",
    ] {
        env.env.unset(var);
    }
    let home = std::env::temp_dir().join(format!("{}-home", unique_env("cli-home")));
    std::fs::create_dir_all(&home).expect("home");
    env.env.put("HOME", home.display().to_string());
    env.env
        .put("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.base_url.clone());
    let event = json!({ "Records": [{ "messageId": "ok", "body": "{\"id\":\"52\"}" }] }).to_string();
    let (ok, stdout, stderr) = lawsync(&env, &["invoke", "detail", "--event", "-"], &event).await;
    assert!(ok, "{stderr}");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).expect("JSON"),
        json!({ "batchItemFailures": [] })
    );
    assert!(env.docs.join("prec/52.json").exists());
    assert!(
        imds.seen().is_empty(),
        "the metadata service was asked: {:?}",
        imds.seen()
    );
    let lower = stderr.to_lowercase();
    for noise in ["imds", "metadata", "region", "credential"] {
        assert!(!lower.contains(noise), "AWS noise ({noise}) on stderr:\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&env.docs);
    let _ = std::fs::remove_dir_all(&home);
}

/// `queue` needs no key; `gate` does, since the gate belongs to the key, and says so.
#[tokio::test]
async fn queue_commands_need_no_key_and_gate_commands_name_it() {
    let up = Upstream::start(vec![], Reply::status(500)).await;
    let keyless = env(&up, false);
    let (ok, stdout, stderr) = lawsync(&keyless, &["queue", "stats", "--json"], "").await;
    assert!(ok, "{stderr}");
    let stats: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        (stats["depth"].as_u64(), stats["dead"].as_u64()),
        (Some(0), Some(0)),
        "{stats}"
    );
    let (code, _, stderr) = lawsync_exit(&keyless, &["gate", "status"], "").await;
    assert!(
        code == Some(3) && stderr.contains("the gate belongs to the API key; set LAW_API_OC"),
        "exit {code:?}: {stderr}"
    );
    let env = self::env(&up, true);
    let (ok, _, stderr) = lawsync(&env, &["gate", "cooldown", "--seconds", "60"], "").await;
    assert!(ok, "{stderr}");
    let (ok, stdout, _) = lawsync(&env, &["gate", "status", "--json"], "").await;
    assert!(ok);
    let status: Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(
        status["cooldownMs"].as_u64().is_some_and(|c| c > 59_000),
        "{status}"
    );
    let (ok, stdout, _) = lawsync(&keyless, &["queue", "dead"], "").await;
    assert!(ok && stdout.contains("(none)"), "{stdout}");
}

/// Each mistake is said clearly, and ends with its documented exit status: 2 usage,
/// 3 configuration, 4 unavailable, 5 input.
#[tokio::test]
async fn mistakes_get_clear_errors() {
    let up = Upstream::start(vec![], Reply::status(500)).await;
    let env = env(&up, true);
    let (code, _, stderr) = lawsync_exit(&env, &["queue", "redrive"], "").await;
    assert!(
        code == Some(2) && stderr.contains("--id ID, or --all"),
        "exit {code:?}: {stderr}"
    );
    let (code, _, stderr) = lawsync_exit(&env, &["invoke", "detail", "--event", "-"], "{\"nope\":").await;
    assert!(
        code == Some(5) && stderr.contains("not an SQS event"),
        "exit {code:?}: {stderr}"
    );
    let missing = env.docs.join("no-such-event.json").display().to_string();
    let (code, _, stderr) = lawsync_exit(&env, &["invoke", "detail", "--event", &missing], "").await;
    assert!(
        code == Some(5) && stderr.contains("reading the event file"),
        "exit {code:?}: {stderr}"
    );
    let (code, _, stderr) = lawsync_exit(&env, &["sync", "--from", "20260231", "--to", "20260301"], "").await;
    assert!(
        code == Some(2) && stderr.contains("YYYYMMDD"),
        "exit {code:?}: {stderr}"
    );
    let (code, _, stderr) = lawsync_exit(&env, &["gate", "cooldown", "--seconds", "0"], "").await;
    assert!(
        code == Some(2) && stderr.contains("--seconds must be 1..=86400"),
        "exit {code:?}: {stderr}"
    );
    // Clap's own usage errors exit 2 as well.
    let (code, _, stderr) = lawsync_exit(&env, &["queue", "list", "--limit", "many"], "").await;
    assert!(
        code == Some(2) && stderr.contains("--limit"),
        "exit {code:?}: {stderr}"
    );
    let keyless = self::env(&up, false);
    let (code, _, stderr) = lawsync_exit(&keyless, &["invoke", "detail", "--event", "-"], "{}").await;
    assert!(
        code == Some(3) && stderr.contains("LAW_API_OC"),
        "exit {code:?}: {stderr}"
    );
    let mut no_redis = self::env(&up, true);
    no_redis.env.put(
        "REDIS_URL",
        format!("redis://127.0.0.1:{}", lawsync_tests::servers::dead_port()),
    );
    let (code, _, stderr) = lawsync_exit(&no_redis, &["queue", "stats"], "").await;
    assert!(
        code == Some(4) && stderr.contains("Redis unreachable"),
        "exit {code:?}: {stderr}"
    );
}

#[tokio::test]
async fn sync_sends_a_search_message_and_the_drainer_runs_a_pass() {
    let up = Upstream::start(vec![], Reply::status(500)).await;
    let mut env = env(&up, true);
    let sqs = aws_sdk_sqs::Client::new(&lawsync_tests::servers::moto_sdk().await);
    let name = unique_env("sync");
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("queue")
        .queue_url()
        .expect("url")
        .to_owned();
    env.env.put("SEARCH_QUEUE_URL", url.clone());
    let (ok, stdout, stderr) = lawsync(
        &env,
        &[
            "sync",
            "--from",
            "20260101",
            "--to",
            "20260131",
            "--query",
            "손해배상",
        ],
        "",
    )
    .await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("sent to the search queue"), "{stdout}");
    let got = sqs
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .expect("receive");
    let bodies: Vec<Value> = got
        .messages()
        .iter()
        .map(|m| serde_json::from_str(m.body().expect("body")).expect("json"))
        .collect();
    assert_eq!(bodies.len(), 1);
    let run = bodies[0]["run"]
        .as_str()
        .expect("the message names its run")
        .to_owned();
    assert!(run.starts_with("sync-"), "{run}");
    assert_eq!(
        bodies,
        [json!({ "from": "20260101", "to": "20260131", "query": "손해배상", "run": run })]
    );
    // The run is open before its first page is read, and `sync status` shows it.
    let (ok, stdout, stderr) = lawsync(&env, &["sync", "status", &run, "--json"], "").await;
    assert!(ok, "{stderr}");
    let status: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(status[0]["status"]["runId"], run.as_str(), "{status}");
    assert_eq!(status[0]["complete"], false);
    assert_eq!(
        status[0]["status"]["plan"]["windows"],
        json!(["20260101~20260131~손해배상"])
    );
    let (ok, text, stderr) = lawsync(&env, &["sync", "status"], "").await;
    assert!(ok, "{stderr}");
    assert!(
        text.contains(&run) && text.contains("running") && text.contains("[---"),
        "{text}"
    );
    let (ok, stdout, stderr) = lawsync(&env, &["invoke", "drainer", "--json"], "").await;
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["status"], "ran", "{report}");
    assert_eq!(report["passes"][0]["claimed"], 0, "{report}");
}

#[tokio::test]
async fn sync_names_what_is_wrong_with_its_flags() {
    let up = Upstream::start(vec![], Reply::status(500)).await;
    let env = env(&up, true);
    for (args, exit, says) in [
        (
            &["sync"][..],
            2,
            "say which: --from YYYYMMDD --to YYYYMMDD, or --all",
        ),
        (&["sync", "--from", "20260101"][..], 2, "say which"),
        (
            &["sync", "--all", "--from", "20260101"][..],
            2,
            "cannot be used with",
        ),
        (
            &["sync", "--from", "20260132", "--to", "20260201"][..],
            2,
            "from must be a date as YYYYMMDD",
        ),
        (&["sync", "status", "a/b"][..], 2, "run id must be 1-64 of"),
        (
            &["sync", "status", "sync-19990101T000000Z-0000"][..],
            1,
            "no run sync-19990101T000000Z-0000",
        ),
    ] {
        let (code, _, stderr) = lawsync_exit(&env, args, "").await;
        assert_eq!(code, Some(exit), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains(OC), "the key in an error");
    }
}

/// The acceptance run: four `lawsync invoke detail` processes at once, five ids each,
/// against an upstream that answers 429 to any two calls closer than its interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_share_the_gate_without_a_single_429() {
    // The upstream's rule is 200 ms; the gate runs 25 ms above it. Two starts may come
    // the tolerance (10 ms) closer than the gate, and a debug build on a busy 2-core machine
    // wakes 1.5-10 ms late (measured here), so a tighter tolerance moves slots over and over;
    // the other 15 ms cover the time from the grant to the request's arrival.
    const RULE: std::time::Duration = std::time::Duration::from_millis(200);
    let doc = json!({ "PrecService": { "판례정보일련번호": "1", "사건명": "x" } }).to_string();
    let up = Upstream::start(vec![], Reply::json(doc)).await;
    up.enforce_interval(RULE);
    let mut env = env(&up, true);
    env.env.put("LAW_API_REQUEST_INTERVAL_MS", "225");
    env.env.put("LAW_API_GATE_TOLERANCE_MS", "10");
    // Every caller sleeps for its slot here (the seed's behaviour), so all four contend
    // for the gate at once; by default a handler would park what lies beyond the next slot.
    env.env.put("LAW_API_HANDLER_MAX_WAIT_MS", "30000");
    let env = std::sync::Arc::new(env);
    let runs: Vec<_> = (0..4)
        .map(|p| {
            let env = env.clone();
            tokio::spawn(async move {
                let records: Vec<Value> = (0..5)
                    .map(|i| json!({ "messageId": format!("p{p}-{i}"), "body": format!("{{\"id\":\"{}\"}}", 600 + p * 10 + i) }))
                    .collect();
                lawsync(&env, &["invoke", "detail", "--event", "-"], &json!({ "Records": records }).to_string()).await
            })
        })
        .collect();
    for r in runs {
        let (ok, stdout, stderr) = r.await.expect("process task");
        assert!(ok, "{stderr}");
        let response: Value = serde_json::from_str(&stdout).expect("JSON");
        assert_eq!(response["batchItemFailures"], json!([]), "{response}");
    }
    let seen = up.seen();
    let statuses: Vec<u16> = seen.iter().map(|s| s.status).collect();
    assert_eq!(seen.len(), 20, "one call per id: {statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200),
        "the upstream answered 429: {statuses:?}"
    );
    let gaps: Vec<_> = seen.windows(2).map(|w| w[1].at - w[0].at).collect();
    let min_gap = gaps.iter().min().expect("gaps");
    assert!(
        *min_gap >= RULE,
        "calls closer than the upstream's interval: {min_gap:?}"
    );
    eprintln!("four processes: 20 calls, no 429, smallest gap at the upstream {min_gap:?}");
    for p in 0..4 {
        for i in 0..5 {
            let path = env.docs.join(format!("prec/{}.json", 600 + p * 10 + i));
            assert!(path.exists(), "{} not stored", path.display());
        }
    }
    let _ = std::fs::remove_dir_all(&env.docs);
}

/// SIGTERM (or Ctrl-C) ends `lawsync invoke drainer` at the next job: the report is
/// printed, what was not worked is back unchanged, and the lock is free at once, rather
/// than held for its five-minute lease as after a crash.
#[tokio::test]
async fn a_terminated_drainer_hands_back_its_jobs_and_frees_the_lock() {
    let doc = json!({ "PrecService": { "판례정보일련번호": "1", "사건명": "x" } }).to_string();
    let up = Upstream::start(
        vec![],
        Reply::json(doc).delayed(std::time::Duration::from_millis(300)),
    )
    .await;
    let env = env(&up, true);
    let app_env = env.env.get("APP_ENV").expect("APP_ENV");
    let ns = lawsync::Namespace::new(app_env, lawsync::law::UPSTREAM).expect("ns");
    let conn = Topology::Standalone.connect().await;
    let queue = lawsync::queue::RetryQueue::new(conn.clone(), &ns);
    for i in 0..10 {
        let job = lawsync::queue::Job::detail(&(700 + i).to_string());
        let note = lawsync::queue::ErrorNote::now("http_status", "HTTP 503", Some(503));
        queue
            .enqueue_due_in(&job, std::time::Duration::ZERO, note)
            .await
            .expect("park");
    }
    let child = env
        .env
        .command(&["invoke", "drainer", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lawsync");
    let waited = std::time::Instant::now();
    while up.seen().len() < 2 {
        assert!(waited.elapsed() < std::time::Duration::from_secs(30), "no calls");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = child.id().expect("pid").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("the drainer stops within 10 s of SIGTERM")
        .expect("output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stdout.contains(OC) && !stderr.contains(OC));
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    let pass = &report["passes"][0];
    let (done, skipped) = (
        pass["succeeded"].as_u64().expect("succeeded"),
        pass["skipped"].as_u64().expect("skipped"),
    );
    assert!(done >= 1 && skipped >= 1, "{report}");
    assert_eq!(
        done + skipped,
        pass["claimed"].as_u64().expect("claimed"),
        "{report}"
    );
    let left = queue.list(20).await.expect("list");
    assert_eq!(left.len() as u64, 10 - done, "{report}");
    assert!(
        left.iter().all(|e| e.retry_count == 0),
        "handed back unchanged: {left:?}"
    );
    let lock = lawsync::lock::RunnerLock::new(conn, ns.drainer_lock());
    assert!(
        lock.try_acquire(std::time::Duration::from_secs(5))
            .await
            .expect("lock")
            .is_some(),
        "the lock is free at once"
    );
}

/// `lawsync backfill`: a bad range is a usage error naming the flag; a good one plans its
/// windows, sends the newest window's first page under its run, and `sync status` shows
/// the windows done and left. No key anywhere.
#[tokio::test]
async fn backfill_plans_windows_and_sync_status_shows_them() {
    let up = Upstream::start(vec![], Reply::status(500)).await;
    let mut env = env(&up, true);
    for (args, says) in [
        (&["backfill", "--from", "20240101"][..], "--to"),
        (
            &["backfill", "--from", "2024-01-01", "--to", "20240131"][..],
            "--from must be a date as YYYYMMDD",
        ),
        (
            &["backfill", "--from", "20240301", "--to", "20240101"][..],
            "--from must not be after --to",
        ),
    ] {
        let (code, _, stderr) = lawsync_exit(&env, args, "").await;
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains(OC));
    }
    let sqs = aws_sdk_sqs::Client::new(&lawsync_tests::servers::moto_sdk().await);
    let url = sqs
        .create_queue()
        .queue_name(unique_env("bf"))
        .send()
        .await
        .expect("queue")
        .queue_url()
        .expect("url")
        .to_owned();
    env.env.put("SEARCH_QUEUE_URL", url.clone());
    let (ok, stdout, stderr) = lawsync(
        &env,
        &["backfill", "--from", "20240115", "--to", "20240310", "--json"],
        "",
    )
    .await;
    assert!(ok, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(out["status"]["windows"], 4, "{out}");
    let got = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive");
    let bodies: Vec<Value> = got
        .messages()
        .iter()
        .map(|m| serde_json::from_str(m.body().expect("body")).expect("json"))
        .collect();
    assert!(
        bodies
            .contains(&json!({ "from": "20240301", "to": "20240310", "run": "backfill-20240301-20240310" })),
        "{bodies:?}"
    );
    assert!(
        !bodies.iter().any(|b| b.get("all").is_some()),
        "the undated window goes last: {bodies:?}"
    );
    let (ok, text, stderr) = lawsync(&env, &["sync", "status"], "").await;
    assert!(ok, "{stderr}");
    assert!(
        text.contains("backfill: [") && text.contains("0/4 windows done"),
        "{text}"
    );
    let (ok, stdout, stderr) = lawsync(&env, &["sync", "status", "--json"], "").await;
    assert!(ok, "{stderr}");
    let status: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(status["backfill"]["windows"], 4, "{status}");
    assert!(status["runs"].is_array(), "{status}");
}
