//! `lawsync local`, the runtime the demo runs, as a real process: moto's SQS, a real Redis
//! (standalone and cluster) and the law.go.kr look-alike enforcing its rate rule.
//!
//! It must do what an SQS event source mapping and EventBridge do: every message handled
//! through the Lambda handlers, the succeeded ones deleted, the reported failures left to
//! reappear, the drainer run on its schedule; and with the shared gate, no call may break
//! the upstream's rule, while per-instance pacing does.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lawsync::local_events::{EventLine, LocalEvent};
use lawsync_tests::lookalike::{Fault, Injection, Lookalike, LookalikeConfig};
use lawsync_tests::servers::{
    LawsyncEnv, Topology, create_queues, moto_sdk, queue_depth, unique_env, unique_oc,
};

const OC: &str = "oc-SECRET-local7730";
const FROM: &str = "20260105";
const TO: &str = "20260123";

struct Rig {
    env: LawsyncEnv,
    docs: PathBuf,
    events: PathBuf,
    search_url: String,
    detail_url: String,
    sqs: aws_sdk_sqs::Client,
}

/// Queues of their own on moto, a fresh key space, and the environment a deployment gives
/// the functions, aimed at `upstream`. The gate paces at 60 ms; the look-alike's rule is 30.
async fn rig(upstream: &Lookalike, topology: Topology) -> Rig {
    let app_env = unique_env("local");
    let sqs = aws_sdk_sqs::Client::new(&moto_sdk().await);
    let urls = create_queues(&sqs, &app_env).await.expect("queues");
    let docs = std::env::temp_dir().join(format!("{app_env}-docs"));
    let events = std::env::temp_dir().join(format!("{app_env}-events.jsonl"));
    let env = LawsyncEnv::new(&upstream.oc, &upstream.base_url, &topology.url(), &app_env, 60)
        .set("LAW_API_MAX_WAIT_MS", "1500")
        .set("SEARCH_QUEUE_URL", urls[0].clone())
        .set("DETAIL_QUEUE_URL", urls[1].clone())
        .set("DOCUMENT_DIR", docs.display().to_string())
        .set("DRAIN_INTERVAL_MS", "500")
        .set("RUST_LOG", "debug");
    Rig {
        env,
        docs,
        events,
        search_url: urls[0].clone(),
        detail_url: urls[1].clone(),
        sqs,
    }
}

fn lookalike_config() -> LookalikeConfig {
    let mut cfg = LookalikeConfig::new(&unique_oc(OC));
    cfg.interval = Some(Duration::from_millis(30));
    cfg
}

impl Rig {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = self.env.command(args);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs to the end; returns (success, stdout + stderr), checked for the key.
    async fn run(&self, args: &[&str], within: Duration) -> (bool, String) {
        let child = self.command(args).spawn().expect("spawn lawsync");
        let out = tokio::time::timeout(within, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("lawsync {args:?} did not finish within {within:?}"))
            .expect("output");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains(OC), "the key reached lawsync's output");
        (out.status.success(), text)
    }

    /// `lawsync local` with `extra`, until idle for 3 s, its events to the rig's file.
    async fn run_local(&self, extra: &[&str]) -> (bool, String) {
        let events = self.events.display().to_string();
        let mut args = vec![
            "local",
            "--poll-wait",
            "1",
            "--timeout",
            "20",
            "--visibility-timeout",
            "30",
        ];
        // The drainer every 2 s rather than EventBridge's minute: an idle drainer run ends
        // at once, and what is parked after it waits for the next one.
        args.extend(["--drainer-every", "2", "--until-idle", "3", "--events", &events]);
        args.extend(extra);
        self.run(&args, Duration::from_secs(120)).await
    }

    fn events(&self) -> Vec<LocalEvent> {
        let text = std::fs::read_to_string(&self.events).unwrap_or_default();
        assert!(!text.contains(OC), "the key reached the event lines");
        text.lines()
            .map(|l| EventLine::parse(l).expect("an event line is JSON").event)
            .collect()
    }

    async fn depth(&self, url: &str) -> u64 {
        queue_depth(&self.sqs, url).await.expect("depth")
    }
}

fn files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn a_sync_runs_to_completion_like_on_aws(topology: Topology) {
    let upstream = Lookalike::start(lookalike_config()).await.expect("look-alike");
    // Midway trouble: a 503 the client retries, a short 429 that cools the cluster, and a
    // Retry-After past LAW_API_MAX_WAIT_MS that parks the job for the drainer.
    upstream.inject(Injection {
        endpoint: Some("detail".into()),
        ..Injection::new(Fault::Status { status: 503 }, 1)
    });
    upstream.inject(Injection {
        endpoint: Some("detail".into()),
        ..Injection::new(
            Fault::TooMany {
                retry_after: Some(1),
                as_date: false,
            },
            1,
        )
    });
    upstream.inject(Injection {
        endpoint: Some("detail".into()),
        ..Injection::new(
            Fault::TooMany {
                retry_after: Some(3),
                as_date: true,
            },
            1,
        )
    });
    let rig = rig(&upstream, topology).await;
    let (ok, out) = rig
        .run(&["sync", "--from", FROM, "--to", TO], Duration::from_secs(30))
        .await;
    assert!(ok, "sync: {out}");
    let (ok, out) = rig.run_local(&["--name", "t", "--concurrency", "2"]).await;
    assert!(ok, "local: {out}");
    // Stopped mid-run, the drainer handed its lock back rather than leave it to expire.
    let app_env = rig.env.get("APP_ENV").expect("APP_ENV");
    let ns = lawsync::Namespace::new(app_env, lawsync::law::UPSTREAM).expect("ns");
    let lock = lawsync::lock::RunnerLock::new(topology.connect().await, ns.drainer_lock());
    assert!(
        lock.try_acquire(Duration::from_secs(5))
            .await
            .expect("lock")
            .is_some(),
        "drainer lock still held"
    );

    let corpus = upstream.corpus().window(FROM, TO);
    let stored = files(&rig.docs.join("prec"));
    let missing = files(&rig.docs.join("missing"));
    for p in &corpus {
        let name = format!("{}.json", p.id);
        let (here, other) = if p.detail_missing {
            (&missing, &stored)
        } else {
            (&stored, &missing)
        };
        assert!(
            here.contains(&name) && !other.contains(&name),
            "{} misplaced",
            p.id
        );
    }
    assert_eq!(stored.len() + missing.len(), corpus.len());
    for f in &stored {
        let text = std::fs::read_to_string(rig.docs.join("prec").join(f)).expect("read");
        assert!(!text.contains(OC), "{f} holds the key");
    }
    assert_eq!(rig.depth(&rig.search_url).await, 0, "search messages left");
    assert_eq!(rig.depth(&rig.detail_url).await, 0, "detail messages left");

    let arrivals = upstream.arrivals();
    let broken: Vec<_> = arrivals.iter().filter(|a| a.cause == "rate").collect();
    assert!(
        broken.is_empty(),
        "the shared gate let calls break the rule: {broken:?}"
    );
    let events = rig.events();
    // (instance, cooldown_ms) of each call line.
    let calls: Vec<(&str, Option<u64>)> = events
        .iter()
        .filter_map(|e| match e {
            LocalEvent::Call {
                instance,
                cooldown_ms,
                ..
            } => Some((instance.as_str(), *cooldown_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls.len(),
        arrivals.len(),
        "one call line per request the upstream saw"
    );
    assert!(
        calls
            .iter()
            .any(|(_, cooldown_ms)| cooldown_ms.is_some_and(|ms| ms >= 1000))
    );
    let instances: std::collections::BTreeSet<&str> = calls.iter().map(|(instance, _)| *instance).collect();
    assert!(
        instances.len() >= 2,
        "one environment did everything: {instances:?}"
    );
    let parked: u64 = events
        .iter()
        .map(|e| match e {
            LocalEvent::Batch { summary, .. } => u64::from(summary.parked),
            _ => 0,
        })
        .sum();
    let drained: u64 = events
        .iter()
        .map(|e| match e {
            LocalEvent::DrainPass { pass, .. } => u64::from(pass.succeeded),
            _ => 0,
        })
        .sum();
    assert!(
        parked >= 1 && drained >= parked,
        "parked {parked}, drained {drained}"
    );
    assert_eq!(
        events.iter().find_map(|e| match e {
            LocalEvent::Stopped { why, .. } => Some(why.as_str()),
            _ => None,
        }),
        Some("idle")
    );
}

#[tokio::test]
async fn a_sync_runs_to_completion_on_standalone_redis() {
    a_sync_runs_to_completion_like_on_aws(Topology::Standalone).await;
}

#[tokio::test]
async fn a_sync_runs_to_completion_on_a_redis_cluster() {
    a_sync_runs_to_completion_like_on_aws(Topology::Cluster).await;
}

#[tokio::test]
async fn reported_failures_are_left_on_the_queue_for_redelivery() {
    let upstream = Lookalike::start(lookalike_config()).await.expect("look-alike");
    let rig = rig(&upstream, Topology::Standalone).await;
    rig.sqs
        .send_message()
        .queue_url(&rig.detail_url)
        .message_body(r#"{"id":"100001"}"#)
        .send()
        .await
        .expect("send");
    // A 1 s function timeout leaves no room for a call: every message is handed back.
    let events = rig.events.display().to_string();
    let child = rig
        .command(&[
            "local",
            "--concurrency",
            "1",
            "--poll-wait",
            "1",
            "--timeout",
            "1",
            "--visibility-timeout",
            "1",
            "--drainer-every",
            "0",
            "--events",
            &events,
        ])
        .spawn()
        .expect("spawn");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = child.id().expect("running").to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(term.success());
    // Read its output while waiting, or a full pipe would stall it.
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("stops on SIGTERM")
        .expect("wait");
    assert!(out.status.success(), "{:?}", out.status);
    assert!(!String::from_utf8_lossy(&out.stderr).contains(OC));

    let batches: Vec<LocalEvent> = rig
        .events()
        .into_iter()
        .filter(|e| matches!(e, LocalEvent::Batch { .. }))
        .collect();
    assert!(batches.len() >= 2, "not redelivered: {batches:?}");
    assert!(batches.iter().all(|b| matches!(
        b,
        LocalEvent::Batch { batch_item_failures: 1, summary, .. } if summary.returned == 1
    )));
    assert!(
        upstream.arrivals().is_empty(),
        "no time was left, yet law.go.kr was called"
    );
    let out = rig
        .sqs
        .receive_message()
        .queue_url(&rig.detail_url)
        .wait_time_seconds(2)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
        )
        .send()
        .await
        .expect("receive");
    let m = out.messages().first().expect("the message is still on the queue");
    let count = m
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|v| v.parse::<u32>().ok())
        .expect("receive count");
    assert!(
        count as usize > batches.len(),
        "received {count} times for {} batches",
        batches.len()
    );
}

#[tokio::test]
async fn per_instance_pacing_breaks_the_rule_the_shared_gate_keeps() {
    let upstream = Lookalike::start(lookalike_config()).await.expect("look-alike");
    let rig = rig(&upstream, Topology::Standalone).await;
    let ids: Vec<u64> = upstream.corpus().window(FROM, TO).iter().map(|p| p.id).collect();
    for chunk in ids.chunks(10) {
        let entries = chunk.iter().enumerate().map(|(i, id)| {
            aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(format!(r#"{{"id":"{id}"}}"#))
                .build()
                .expect("entry")
        });
        rig.sqs
            .send_message_batch()
            .queue_url(&rig.detail_url)
            .set_entries(Some(entries.collect()))
            .send()
            .await
            .expect("send");
    }
    let (ok, out) = rig
        .run_local(&[
            "--gate",
            "per-instance",
            "--concurrency",
            "3",
            "--batch-size",
            "1",
        ])
        .await;
    assert!(ok, "local: {out}");
    let broken = upstream.arrivals().iter().filter(|a| a.cause == "rate").count();
    assert!(
        broken > 0,
        "three environments pacing only themselves never broke a 30 ms rule"
    );
    eprintln!("per-instance pacing: {broken} calls broke the rule");
}
