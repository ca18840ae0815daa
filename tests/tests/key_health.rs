//! The key-health circuit and the reply formats: the circuit's scripts on every Redis
//! (standalone, a cluster, the TLS cluster), a first deploy whose egress IP is not yet
//! registered (one call, one alert, probes, then the mirror goes on with no attempt
//! counted), a key served XML only, the same precedent stored alike from JSON and XML,
//! and the throttles that send no 429 (an unknown page, a reset connection). Real Redis,
//! the look-alike and scripted upstreams.

use std::sync::Arc;
use std::time::Duration;

use lawsync::config::Config;
use lawsync::key_health::{Accepted, KeyHealth, OpenCircuit, Refused};
use lawsync::law::{Endpoint, Format, KeyProblem, LawError, SearchRequest};
use lawsync::{Deadline, Gate, LawClient, RedisConn, Secret};
use lawsync_tests::lookalike::{Lookalike, LookalikeConfig, Quirks};
use lawsync_tests::mirror::{MirrorRig, Queues, RigSetup, Store};
use lawsync_tests::servers::{Topology, unique_ns, unique_oc};
use lawsync_tests::upstream::{Body, Reply, Upstream};

const OC: &str = "oc-SECRET-health9043";

/// A gate of its own (a namespace's) and its key-health records.
fn circuit_on(conn: RedisConn) -> (Gate, KeyHealth) {
    let gate = Gate::new(
        conn.clone(),
        &unique_ns("health"),
        lawsync::GateConfig::new(Duration::from_millis(50), 1, Duration::from_secs(1)),
    );
    let health = KeyHealth::beside(conn, gate.key());
    (gate, health)
}

const HOLD: Duration = Duration::from_secs(300);

async fn refuse(health: &KeyHealth, gate: &Gate, problem: KeyProblem, endpoint: Endpoint) -> Refused {
    health
        .refused(&problem, endpoint, gate, HOLD)
        .await
        .expect("refused")
}

/// Redis' clock, µs (as a grant carries it).
async fn redis_now_us(conn: &RedisConn) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut conn.clone())
        .await
        .expect("time");
    s * 1_000_000 + us
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_open_the_circuit_once_hold_the_gate_count_the_rest_and_expire() {
    for topology in Topology::EVERY {
        let conn = topology.connect().await;
        let (gate, health) = circuit_on(conn.clone());
        let gate = Arc::new(gate);
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (h, g) = (health.clone(), gate.clone());
                let problem = if i % 2 == 0 {
                    KeyProblem::VerifyFailed
                } else {
                    KeyProblem::AntiBot
                };
                tokio::spawn(async move { h.refused(&problem, Endpoint::Search, &g, HOLD).await })
            })
            .collect();
        let mut opened = 0;
        for t in tasks {
            opened += u32::from(t.await.expect("task").expect("refused").opened);
        }
        assert_eq!(opened, 1, "{topology:?}: one refusal opens it");
        let open = health.status().await.expect("status").expect("open");
        assert_eq!(
            (open.refusals, open.scope.as_str(), open.alert_owed),
            (16, "any", true)
        );
        // The gate is held in the same step: no circuit without its hold.
        let cooldown = gate.status().await.expect("gate").cooldown.expect("held");
        assert!(
            cooldown > HOLD - Duration::from_secs(5),
            "{topology:?}: {cooldown:?}"
        );
        let ttl: i64 = redis::cmd("PTTL")
            .arg(health.key())
            .query_async(&mut conn.clone())
            .await
            .expect("pttl");
        let keep = lawsync::policy::KEY_HEALTH_KEEP.as_millis() as i64;
        assert!(ttl > keep - 5_000 && ttl <= keep, "{topology:?}: {ttl} ms");
        // Taken on a lease, naming the opening's reason; owed again only for that opening;
        // no longer owed once delivered.
        let taken = health.take_alert().await.expect("take").expect("owed");
        assert_eq!(taken.refusals, 16);
        assert_eq!(health.take_alert().await.expect("again"), None, "leased");
        assert!(health.alert_undelivered(&taken).await.expect("owe"));
        let taken = health.take_alert().await.expect("owed again").expect("owed");
        let stale = OpenCircuit {
            opened_ms: taken.opened_ms - 1,
            ..taken.clone()
        };
        assert!(!health.alert_undelivered(&stale).await.expect("another opening"));
        assert!(health.alert_delivered(&taken).await.expect("delivered"));
        assert!(!health.status().await.expect("status").expect("open").alert_owed);
        // A call granted before the latest refusal shows nothing; one after closes it.
        let before = open.last_ms * 1000 - 1;
        assert!(matches!(
            health.accepted(Endpoint::Search, before).await.expect("accepted"),
            Accepted::StillOpen(_)
        ));
        let now = redis_now_us(&conn).await + 1000;
        let Accepted::Closed(closed) = health.accepted(Endpoint::Detail, now).await.expect("accepted") else {
            panic!("{topology:?}: a call after the refusals closes a refusal of the key");
        };
        assert_eq!((closed.refusals, closed.alert_owed), (16, false));
        assert_eq!(
            health.accepted(Endpoint::Search, now).await.expect("closed"),
            Accepted::NothingOpen
        );
        assert!(!health.alert_undelivered(&taken).await.expect("owe when closed"));
        assert_eq!(
            health.status().await.expect("status"),
            None,
            "{topology:?}: nothing recreated"
        );
        // Open again for the same reason within the keep of a delivered alert: none owed.
        let again = refuse(&health, &gate, open_reason(&open.reason), Endpoint::Search).await;
        assert!(again.opened);
        assert_eq!(
            health.take_alert().await.expect("take"),
            None,
            "{topology:?}: alerted twice"
        );
        let now = redis_now_us(&conn).await + 1000;
        health.accepted(Endpoint::Search, now).await.expect("close");
        let other = refuse(
            &health,
            &gate,
            KeyProblem::Tls {
                problem: lawsync::law::TlsProblem::UnknownIssuer,
            },
            Endpoint::Search,
        )
        .await;
        assert!(other.opened);
        assert!(
            health.take_alert().await.expect("take").is_some(),
            "{topology:?}: a new reason alerts"
        );
    }
}

fn open_reason(kind: &str) -> KeyProblem {
    KeyProblem::from_kind(kind).expect("a kind")
}

/// An API the key was not granted (the detail, in one format): a search answered shows
/// nothing about it; a detail answered closes it.
#[tokio::test]
async fn a_refused_api_is_closed_only_by_an_answer_from_that_api() {
    let conn = Topology::Standalone.connect().await;
    let (gate, health) = circuit_on(conn.clone());
    let refusal = KeyProblem::NotApplied {
        format: Some(Format::Json),
    };
    refuse(&health, &gate, refusal, Endpoint::Detail).await;
    let now = redis_now_us(&conn).await + 1000;
    let Accepted::StillOpen(open) = health.accepted(Endpoint::Search, now).await.expect("search") else {
        panic!("a search answered closed a refusal of the detail API");
    };
    assert_eq!(open.reason, "not_applied_json");
    assert_eq!(
        health.status().await.expect("status").expect("open").scope,
        "detail"
    );
    // A refusal of the key itself widens it: only an answer shows the key accepted.
    refuse(&health, &gate, KeyProblem::VerifyFailed, Endpoint::Search).await;
    let open = health.status().await.expect("status").expect("open");
    assert_eq!(
        (
            open.scope.as_str(),
            open.reason.as_str(),
            open.last_reason.as_str()
        ),
        ("any", "not_applied_json", "auth_rejected")
    );
    let now = redis_now_us(&conn).await + 1000;
    assert!(matches!(
        health.accepted(Endpoint::Search, now).await.expect("search"),
        Accepted::Closed(_)
    ));
}

#[tokio::test]
async fn damaged_circuit_state_is_named_and_nothing_is_written() {
    for topology in Topology::EVERY {
        let mut conn = topology.connect().await;
        let (gate, health) = circuit_on(conn.clone());
        let sound = [
            ("v", "1"),
            ("reason", "auth_rejected"),
            ("last_reason", "auth_rejected"),
            ("scope", "any"),
            ("opened_ms", "1700000000000"),
            ("last_ms", "1700000000000"),
            ("refusals", "3"),
            ("alert", "1"),
        ];
        let damages: &[(&str, &str)] = &[
            ("v", "0x1"),
            ("v", "1.0"),
            ("v", "0"),
            ("opened_ms", "0x10"),
            ("opened_ms", " 5"),
            ("refusals", "1e15"),
            ("refusals", "nan"),
            ("last_ms", "-1"),
            ("scope", "everything"),
            ("reason", "Auth"),
            ("v", "01"),
            ("refusals", "0"),
            ("refusals", "007"),
            ("alert", "soon"),
            // Ahead of Redis' clock by more than two days.
            ("last_ms", "9000000000000000"),
            ("alert", "9000000000000000"),
            ("opened_ms", "9000000000000000"),
        ];
        for (field, bad) in damages {
            let _: () = redis::cmd("DEL")
                .arg(health.key())
                .query_async(&mut conn)
                .await
                .expect("del");
            let mut hset = redis::cmd("HSET");
            hset.arg(health.key());
            for (k, v) in sound {
                hset.arg(k).arg(if k == *field { *bad } else { v });
            }
            let _: () = hset.query_async(&mut conn).await.expect("hset");
            let gate_before: Option<String> = redis::cmd("HGET")
                .arg(gate.key())
                .arg("cool")
                .query_async(&mut conn)
                .await
                .expect("gate");
            let now = redis_now_us(&conn).await;
            let errors = [
                health
                    .refused(&KeyProblem::AntiBot, Endpoint::Search, &gate, HOLD)
                    .await
                    .map(|_| ()),
                health.accepted(Endpoint::Search, now).await.map(|_| ()),
                health.take_alert().await.map(|_| ()),
            ];
            for e in errors {
                let e = e.expect_err("damaged").to_string();
                assert!(
                    e.contains("corrupt") && e.contains("not a key-health circuit"),
                    "{topology:?} {field}={bad}: {e}"
                );
            }
            let left: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(health.key())
                .arg(&["v", "refusals", "alert", "last_reason"])
                .query_async(&mut conn)
                .await
                .expect("hmget");
            let want = |k: &str| {
                Some(if k == *field {
                    bad.to_string()
                } else {
                    sound
                        .iter()
                        .find(|(n, _)| *n == k)
                        .map(|(_, v)| v.to_string())
                        .unwrap_or_default()
                })
            };
            assert_eq!(
                left,
                vec![want("v"), want("refusals"), want("alert"), want("last_reason")],
                "{topology:?} {field}={bad}: written"
            );
            let gate_after: Option<String> = redis::cmd("HGET")
                .arg(gate.key())
                .arg("cool")
                .query_async(&mut conn)
                .await
                .expect("gate");
            assert_eq!(
                gate_before, gate_after,
                "{topology:?} {field}={bad}: the gate was held"
            );
        }
        // Newer, a string, and bad arguments.
        let _: () = redis::cmd("HSET")
            .arg(health.key())
            .arg("v")
            .arg("2")
            .query_async(&mut conn)
            .await
            .expect("hset");
        let e = health.take_alert().await.expect_err("newer").to_string();
        assert!(e.contains("newer") && e.contains("version 2"), "{e}");
        // The gate neither probes nor writes into a circuit it does not read.
        let probe = lawsync::gate::Probe {
            endpoint: "search",
            window: Duration::from_secs(5),
        };
        let g = gate
            .acquire_probing(Deadline::NONE, Duration::from_secs(2), probe)
            .await
            .expect("granted");
        assert!(!g.probe, "{topology:?}");
        let marked: bool = redis::cmd("HEXISTS")
            .arg(health.key())
            .arg("probe_until")
            .query_async(&mut conn)
            .await
            .expect("hexists");
        assert!(!marked, "{topology:?}: wrote into a newer circuit");
        let _: () = redis::cmd("DEL")
            .arg(health.key())
            .query_async(&mut conn)
            .await
            .expect("del");
        let _: () = redis::cmd("SET")
            .arg(health.key())
            .arg("x")
            .query_async(&mut conn)
            .await
            .expect("set");
        let e = health
            .refused(&KeyProblem::AntiBot, Endpoint::Search, &gate, HOLD)
            .await
            .expect_err("a string")
            .to_string();
        assert!(e.contains("not a hash"), "{e}");
        let _: () = redis::cmd("DEL")
            .arg(health.key())
            .query_async(&mut conn)
            .await
            .expect("del");
        let keys = ThreeKeys {
            health: health.key().to_owned(),
            alerted: lawsync::keys::beside_gate(gate.key(), "alerted"),
            gate: gate.key().to_owned(),
        };
        // Each line is one argument away from sound (the first).
        let sound = ["auth", "any", "1", "1", "1", "1", "0", "1"];
        let ok = lawsync::lua::KEY_REFUSED
            .prepare(&keys)
            .arg(&sound[..])
            .invoke_async::<Vec<i64>>(&mut conn.clone())
            .await
            .expect("sound arguments");
        assert_eq!(ok[0], 1, "{topology:?}: opened");
        let _: () = redis::cmd("DEL")
            .arg(&keys.health)
            .arg(&keys.gate)
            .query_async(&mut conn)
            .await
            .expect("del");
        // Two days and a second, in µs: the gate state would read as damaged.
        let beyond = "172801000000";
        for argv in [
            ["Auth", "any", "1", "1", "1", "1", "0", "1"],
            ["auth", "all", "1", "1", "1", "1", "0", "1"],
            ["auth", "any", "1e3", "1", "1", "1", "0", "1"],
            ["auth", "any", "0x10", "1", "1", "1", "0", "1"],
            ["auth", "any", "10", "0", "1", "1", "0", "1"],
            ["auth", "any", "10", "10", "1", "1", "-1", "1"],
            ["auth", "any", "10", beyond, "1", "1", "0", "1"],
            ["auth", "any", "10", "86400000000", "86400000000", "3", "0", "1"],
        ] {
            let e = lawsync::lua::KEY_REFUSED
                .prepare(&keys)
                .arg(&argv[..])
                .invoke_async::<Vec<i64>>(&mut conn.clone())
                .await
                .expect_err("bad arguments");
            assert!(e.to_string().contains("BADARG"), "{argv:?}: {e}");
        }
        let written: i64 = redis::cmd("EXISTS")
            .arg(&keys.health)
            .arg(&keys.alerted)
            .arg(&keys.gate)
            .query_async(&mut conn)
            .await
            .expect("exists");
        assert_eq!(written, 0, "{topology:?}: bad arguments wrote");
    }
}

/// The three keys `key_refused` binds, by name.
struct ThreeKeys {
    health: String,
    alerted: String,
    gate: String,
}

impl lawsync::lua::ScriptKeys for ThreeKeys {
    fn key(&self, name: &str) -> Option<&str> {
        match name {
            "health" => Some(&self.health),
            "alerted" => Some(&self.alerted),
            "gate" => Some(&self.gate),
            _ => None,
        }
    }
}

/// A mirror whose egress IP law.go.kr does not know yet: the first call opens the circuit,
/// then nothing but one probe per interval reaches law.go.kr, one alert goes out, and no
/// job's attempt is counted; once the IP is registered, a probe closes the circuit and the
/// mirror goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unregistered_ip_is_called_once_alerted_once_probed_and_then_mirrored() {
    const PROBE: Duration = Duration::from_millis(2000);
    let mut setup = RigSetup::new(Store::Folder, Queues::Memory, 21, Some("20260227"));
    setup.key_probe = Some(PROBE);
    // The drainer's wait bound under the interval, as the policy's five minutes are over
    // its 30 s: a held job is released, not slept for.
    setup.env.push(("LAW_API_MAX_WAIT_MS", "500".to_owned()));
    setup.registered = Some(vec!["127.0.0.2".parse().expect("ip")]);
    let rig = MirrorRig::start_setup(setup).await;
    let run = rig
        .sync(SearchRequest {
            from: "20260105".into(),
            to: "20260206".into(),
            ..Default::default()
        })
        .await;
    rig.pump().await;
    rig.drain(1).await;
    let refused = |rig: &MirrorRig| -> Vec<f64> {
        rig.lookalike
            .arrivals()
            .into_iter()
            .filter(|a| a.cause == "unregistered")
            .map(|a| a.at_ms)
            .collect()
    };
    assert_eq!(
        refused(&rig).len(),
        1,
        "one call, then the circuit holds every caller off"
    );
    assert_eq!(rig.lookalike.arrivals().len(), 1);
    let open = rig
        .deps
        .law
        .health()
        .status()
        .await
        .expect("status")
        .expect("open");
    assert_eq!(open.reason, "auth_rejected");
    assert_eq!(
        rig.alerts.keys.lock().expect("alerts").len(),
        1,
        "one alert for the opening"
    );
    let listed = rig.deps.queue.list(10).await.expect("list");
    assert_eq!(listed.len(), 1, "the first page, parked: {listed:?}");
    assert_eq!(
        listed[0].retry_count, 0,
        "a refusal of the key is not the job's attempt"
    );

    // Probes, one per interval, still refused; no new alert, no attempt counted.
    let until = tokio::time::Instant::now() + PROBE * 3;
    while tokio::time::Instant::now() < until {
        rig.drain(1).await;
        rig.pump().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let calls = refused(&rig);
    assert!(
        calls.len() >= 2 && calls.len() <= 4,
        "{} probes in three intervals",
        calls.len() - 1
    );
    for pair in calls.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= PROBE.as_millis() as f64 - 50.0,
            "a probe {gap} ms after the last"
        );
    }
    assert_eq!(
        rig.lookalike.arrivals().len(),
        calls.len(),
        "nothing but probes was called"
    );
    assert_eq!(rig.alerts.keys.lock().expect("alerts").len(), 1);
    let listed = rig.deps.queue.list(10).await.expect("list");
    assert_eq!(listed[0].retry_count, 0, "{listed:?}");

    // The operator registers the IP: the next probe closes it and the mirror goes on.
    rig.lookalike.set_registered(None);
    for _ in 0..40 {
        rig.drain(3).await;
        rig.pump().await;
        if rig.status(&run).await.recorded_ms.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        rig.deps.law.health().status().await.expect("status"),
        None,
        "closed"
    );
    let status = rig.status(&run).await;
    assert!(status.recorded_ms.is_some(), "the run completes: {status:?}");
    assert_eq!(
        refused(&rig).len(),
        calls.len(),
        "nothing refused once registered"
    );
    assert!(rig.deps.queue.dead(10).await.expect("dead").is_empty());
    assert_eq!(rig.alerts.keys.lock().expect("alerts").len(), 1);
}

fn config(base: &str, extra: &[(&str, &str)]) -> Config {
    let mut vars: Vec<(String, String)> = vec![
        ("LAW_API_OC".into(), OC.into()),
        ("LAW_API_BASE_URL".into(), base.into()),
        ("LAW_API_REQUEST_INTERVAL_MS".into(), "10".into()),
        ("LAW_API_MAX_ATTEMPTS".into(), "2".into()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config::from_lookup(|k| vars.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone())).expect("config")
}

/// A client of its own gate (one per key, as in production), on standalone Redis.
async fn client(base: &str, oc: &str, extra: &[(&str, &str)], gate_ns: &lawsync::Namespace) -> LawClient {
    let cfg = config(base, extra);
    let gate = Arc::new(Gate::new(Topology::Standalone.connect().await, gate_ns, cfg.gate));
    LawClient::new(&cfg.law, Secret::new(oc), gate).expect("client")
}

fn window() -> SearchRequest {
    SearchRequest {
        from: "20260105".into(),
        to: "20260206".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_key_served_xml_only_is_read_in_xml_and_every_cold_start_asks_in_it() {
    let oc = unique_oc(OC);
    let mut la = LookalikeConfig::new(&oc);
    la.interval = None;
    la.quirks = Quirks {
        refuse_json: true,
        ..Quirks::default()
    };
    let up = Lookalike::start(la).await.expect("look-alike");
    let ns = unique_ns("xml-only");
    let first = client(&up.base_url, &oc, &[], &ns).await;
    let page = first
        .search(&window(), Deadline::NONE)
        .await
        .expect("served in XML");
    assert!(page.total > 0);
    let formats: Vec<_> = up.arrivals().into_iter().map(|a| (a.format, a.cause)).collect();
    assert_eq!(
        formats,
        [
            (Some("json".into()), "not_applied".into()),
            (Some("xml".into()), "ok".into())
        ]
    );
    assert_eq!(
        first
            .health()
            .learned_format(Endpoint::Search)
            .await
            .expect("learned"),
        Some(Format::Xml)
    );
    // A cold start on the same key asks in XML at once.
    let second = client(&up.base_url, &oc, &[], &ns).await;
    second.search(&window(), Deadline::NONE).await.expect("served");
    assert_eq!(
        up.arrivals().last().and_then(|a| a.format.clone()).as_deref(),
        Some("xml")
    );
    assert_eq!(up.arrivals().len(), 3, "no JSON asked again");
    assert_eq!(
        second.health().status().await.expect("status"),
        None,
        "no refusal of the key"
    );

    // Set to JSON only, the same key is refused in JSON: the circuit opens, named.
    let fixed = client(
        &up.base_url,
        &oc,
        &[("LAW_API_FORMAT", "json")],
        &unique_ns("json-only"),
    )
    .await;
    let e = fixed
        .search(&window(), Deadline::NONE)
        .await
        .expect_err("refused");
    assert_eq!(
        e,
        LawError::KeyRefused(KeyProblem::NotApplied {
            format: Some(Format::Json)
        })
    );
    assert!(e.to_string().contains("LAW_API_FORMAT=auto"), "{e}");
    // Refused in both, `auto` says so.
    up.set_quirks(Quirks {
        refuse_json: true,
        refuse_xml: true,
        ..Quirks::default()
    })
    .expect("quirks");
    let neither = client(&up.base_url, &oc, &[], &unique_ns("neither")).await;
    let e = neither
        .search(&window(), Deadline::NONE)
        .await
        .expect_err("refused");
    assert_eq!(e, LawError::KeyRefused(KeyProblem::NotApplied { format: None }));
    let open = neither.health().status().await.expect("status").expect("open");
    assert_eq!(open.reason, "not_applied");
}

/// The same window mirrored through JSON and through XML stores the same envelopes: the
/// listing, its hash, the detail and its hash, byte for byte but for when it was fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_precedent_read_as_json_or_as_xml_is_stored_the_same() {
    let mut stored = Vec::new();
    for format in ["json", "xml"] {
        let mut setup = RigSetup::new(Store::Folder, Queues::Memory, 33, Some("20260227"));
        setup.env.push(("LAW_API_FORMAT", format.to_owned()));
        let rig = MirrorRig::start_setup(setup).await;
        rig.sync(window()).await;
        rig.pump().await;
        let formats: Vec<_> = rig
            .lookalike
            .arrivals()
            .into_iter()
            .filter_map(|a| a.format)
            .collect();
        assert!(formats.iter().all(|f| f == format), "{format}: {formats:?}");
        let mut envelopes = std::collections::BTreeMap::new();
        for key in rig.keys("prec/").await {
            let mut v = rig.json(&key).await;
            let obj = v.as_object_mut().expect("envelope");
            for varies in ["fetchedAt", "firstSeenAt", "runId"] {
                obj.remove(varies);
            }
            envelopes.insert(key, v);
        }
        assert!(envelopes.len() > 10, "{format}: {} stored", envelopes.len());
        stored.push(envelopes);
    }
    assert_eq!(
        stored[0].keys().collect::<Vec<_>>(),
        stored[1].keys().collect::<Vec<_>>()
    );
    for (key, json) in &stored[0] {
        assert_eq!(json, &stored[1][key], "{key} differs between JSON and XML");
    }
}

/// A 200 HTML page of no known shape (a throttle page nobody recorded): kept for `lawsync
/// probe` with the key masked, and the whole cluster holds off; a reset after the request:
/// the cluster cools down as after a 429 without Retry-After, and the retry succeeds.
#[tokio::test]
async fn throttles_without_a_429_hold_the_cluster_off() {
    let page = format!("<html><body>잠시 후 다시 시도하세요 OC={OC}</body></html>");
    let up = Upstream::start(vec![Reply::status(200).text(page)], Reply::status(500)).await;
    let ns = unique_ns("page");
    let c = client(&up.base_url, OC, &[], &ns).await;
    let e = c.detail("7", Deadline::NONE).await.expect_err("a page");
    assert_eq!(e, LawError::HtmlPage);
    let kept = c.health().unknown_replies().await.expect("kept");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].head.contains("잠시 후") && kept[0].head.contains("OC=***"),
        "{:?}",
        kept[0]
    );
    assert!(!format!("{kept:?}").contains(OC));
    let cooldown = c
        .gate()
        .status()
        .await
        .expect("status")
        .cooldown
        .expect("held off");
    assert!(cooldown > Duration::from_secs(55), "{cooldown:?}");

    let detail = r#"{"PrecService":{"판례정보일련번호":"7","사건명":"x"}}"#;
    let up = Upstream::start(
        vec![Reply::status(0).with_body(Body::Reset), Reply::json(detail)],
        Reply::status(500),
    )
    .await;
    let c = client(&up.base_url, OC, &[], &unique_ns("reset")).await;
    let seen = Arc::new(Seen::default());
    let c = c.with_observer(seen.clone());
    c.detail("7", Deadline::NONE)
        .await
        .expect("the retry after the reset");
    let events = seen.0.lock().expect("events").clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        (events[0].status, events[0].cooldown.is_some()),
        (None, true),
        "{events:?}"
    );
}

#[derive(Debug, Default)]
struct Seen(std::sync::Mutex<Vec<lawsync::law::CallEvent>>);

impl lawsync::law::CallObserver for Seen {
    fn observe(&self, e: &lawsync::law::CallEvent) {
        self.0.lock().expect("events").push(e.clone());
    }
}

/// The look-alike refuses an address not registered with the key, in the format asked.
#[tokio::test]
async fn the_lookalike_refuses_an_unregistered_address_in_either_format() {
    let oc = unique_oc(OC);
    let mut la = LookalikeConfig::new(&oc);
    la.interval = None;
    la.registered = Some(vec!["10.0.0.1".parse().expect("ip")]);
    let up = Lookalike::start(la).await.expect("look-alike");
    for format in ["json", "xml"] {
        let c = client(
            &up.base_url,
            &oc,
            &[("LAW_API_FORMAT", format)],
            &unique_ns("unreg"),
        )
        .await;
        let e = c
            .detail("100001", Deadline::NONE)
            .await
            .expect_err("unregistered");
        assert_eq!(e, LawError::KeyRefused(KeyProblem::VerifyFailed), "{format}");
    }
    let causes: Vec<_> = up.arrivals().into_iter().map(|a| (a.cause, a.format)).collect();
    assert_eq!(
        causes,
        [
            ("unregistered".to_owned(), Some("json".to_owned())),
            ("unregistered".to_owned(), Some("xml".to_owned()))
        ]
    );
}

/// The alert is delivered at least once: taken on a lease and never confirmed (the drainer
/// died, or Redis' reply was lost), it is offered again when the lease ends; an alert still
/// owed when its circuit closes silences nothing after it; a count at its ceiling is read
/// back in digits and stays there.
#[tokio::test]
async fn an_alert_is_offered_until_its_delivery_is_confirmed() {
    for topology in Topology::EVERY {
        let mut conn = topology.connect().await;
        let (gate, health) = circuit_on(conn.clone());
        let keys = ThreeKeys {
            health: health.key().to_owned(),
            alerted: lawsync::keys::beside_gate(gate.key(), "alerted"),
            gate: gate.key().to_owned(),
        };
        let take = |lease_ms: u64| {
            let keys = &keys;
            let conn = conn.clone();
            async move {
                lawsync::lua::KEY_ALERT
                    .prepare(keys)
                    .arg("take")
                    .arg(lease_ms)
                    .invoke_async::<Vec<String>>(&mut conn.clone())
                    .await
                    .expect("take")
            }
        };
        let open = refuse(&health, &gate, KeyProblem::AntiBot, Endpoint::Search).await;
        let taken = take(150).await;
        assert_eq!(taken[0], "anti_bot", "{topology:?}");
        assert_eq!(take(150).await, Vec::<String>::new(), "{topology:?}: leased");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            take(150).await,
            taken,
            "{topology:?}: offered again after the lease"
        );

        // Owed and never delivered when a probe closes it: the next opening for the same
        // reason owes its own alert.
        let now = redis_now_us(&conn).await + 1000;
        let Accepted::Closed(closed) = health.accepted(Endpoint::Search, now).await.expect("close") else {
            panic!("{topology:?}: not closed");
        };
        assert!(closed.alert_owed, "{topology:?}");
        let again = refuse(&health, &gate, KeyProblem::AntiBot, Endpoint::Search).await;
        assert!(again.opened && again.opened_ms >= open.opened_ms);
        let owed = health.take_alert().await.expect("take").expect("owed");
        assert_eq!(owed.reason, "anti_bot");
        // Delivered after its circuit closed: still remembered, so the next opening for
        // that reason within the keep owes none.
        let now = redis_now_us(&conn).await + 1000;
        health.accepted(Endpoint::Search, now).await.expect("close");
        assert!(!health.alert_delivered(&owed).await.expect("delivered"));
        let marker: Option<String> = redis::cmd("GET")
            .arg(&keys.alerted)
            .query_async(&mut conn)
            .await
            .expect("get");
        assert_eq!(marker.as_deref(), Some("anti_bot"), "{topology:?}");
        refuse(&health, &gate, KeyProblem::AntiBot, Endpoint::Search).await;
        assert_eq!(health.take_alert().await.expect("take"), None, "{topology:?}");

        // Counts at 2^53 - 1: read back in digits, and one more refusal keeps them there.
        let top = "9007199254740991";
        let _: () = redis::cmd("HSET")
            .arg(health.key())
            .arg("refusals")
            .arg(top)
            .arg("alert")
            .arg("0")
            .query_async(&mut conn)
            .await
            .expect("hset");
        refuse(&health, &gate, KeyProblem::AntiBot, Endpoint::Search).await;
        let taken = health.take_alert().await.expect("take").expect("owed");
        assert_eq!(taken.refusals.to_string(), top, "{topology:?}");
        let _: () = redis::cmd("DEL")
            .arg(&keys.health)
            .arg(&keys.alerted)
            .query_async(&mut conn)
            .await
            .expect("del");
    }
}

/// While the circuit is open, one call that could close it is out at a time: the first is
/// its probe, and the next such call waits for the probe's answer (or its window) as for a
/// cooldown; a circuit about one API holds that API alone; a probe given back, or ended
/// with no answer about the key, lets the next call probe at once; the probe is the
/// circuit's, so a lost gate state keeps it and an expired circuit ends it; a closed
/// circuit leaves the gate paced at the interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_circuit_lets_one_probe_out_at_a_time() {
    use lawsync::gate::Probe;
    const SHORT_HOLD: Duration = Duration::from_millis(150);
    let window = Duration::from_millis(1200);
    let search = Probe {
        endpoint: "search",
        window,
    };
    let detail = Probe {
        endpoint: "detail",
        window,
    };
    let wait = Duration::from_millis(200);
    for topology in Topology::EVERY {
        let mut conn = topology.connect().await;
        let (gate, health) = circuit_on(conn.clone());
        health
            .refused(&KeyProblem::VerifyFailed, Endpoint::Search, &gate, SHORT_HOLD)
            .await
            .expect("refused");
        tokio::time::sleep(SHORT_HOLD + Duration::from_millis(20)).await;
        let probe = gate
            .acquire_probing(Deadline::NONE, wait, search)
            .await
            .expect("the probe");
        assert!(probe.probe, "{topology:?}");
        // Another instance, an interval later, to either API: held for the probe's answer.
        tokio::time::sleep(Duration::from_millis(60)).await;
        let held = gate.acquire_probing(Deadline::NONE, wait, detail).await;
        let Err(lawsync::GateError::WaitTooLong {
            cause: lawsync::Refusal::Circuit { remaining },
            ..
        }) = held
        else {
            panic!("{topology:?}: a second call started beside the probe: {held:?}");
        };
        assert!(
            remaining > window - Duration::from_millis(300) && remaining <= window,
            "{topology:?}: {remaining:?}"
        );
        // Given back unsent: the next call is the probe, at once.
        assert!(gate.give_back(&probe).await.expect("give back"));
        let again = gate
            .acquire_again(&probe, Deadline::NONE, wait, Some(search))
            .await
            .expect("probes again at once");
        assert!(again.probe, "{topology:?}");
        // The gate state lost (evicted, or deleted as a CORRUPT error advises): the probe is
        // the circuit's, and still holds the next caller.
        let _: () = redis::cmd("DEL")
            .arg(gate.key())
            .query_async(&mut conn)
            .await
            .expect("del");
        assert!(
            gate.acquire_probing(Deadline::NONE, wait, search).await.is_err(),
            "{topology:?}: a call beside the probe after the gate state was lost"
        );
        // Answered: the circuit closes, and calls go on at the interval.
        let Accepted::Closed(_) = health
            .accepted(Endpoint::Search, again.granted_at_us)
            .await
            .expect("accepted")
        else {
            panic!("{topology:?}: the probe's answer did not close the circuit");
        };
        let first = gate
            .acquire_probing(Deadline::NONE, wait, search)
            .await
            .expect("closed");
        let next = gate
            .acquire_probing(Deadline::NONE, wait, search)
            .await
            .expect("paced, not held");
        assert!(!first.probe && !next.probe, "{topology:?}");
        let gap = next.granted_at_us - first.granted_at_us;
        assert!(
            (50_000..200_000).contains(&gap),
            "{topology:?}: {gap} µs between two calls of a closed circuit"
        );

        // A circuit about the detail API alone: searches go on, even during its hold;
        // details wait out the hold, then probe one at a time.
        let refusal = KeyProblem::NotApplied { format: None };
        let hold = Duration::from_millis(600);
        health
            .refused(&refusal, Endpoint::Detail, &gate, hold)
            .await
            .expect("refused");
        for _ in 0..2 {
            let g = gate
                .acquire_probing(Deadline::NONE, wait, search)
                .await
                .expect("a search, not held");
            assert!(!g.probe, "{topology:?}: a search cannot close a detail circuit");
        }
        let held = gate.acquire_probing(Deadline::NONE, wait, detail).await;
        assert!(
            matches!(held, Err(lawsync::GateError::WaitTooLong { cause: lawsync::Refusal::Circuit { remaining }, .. }) if remaining <= hold),
            "{topology:?}: a detail call during the hold: {held:?}"
        );
        tokio::time::sleep(hold).await;
        let probe = gate
            .acquire_probing(Deadline::NONE, wait, detail)
            .await
            .expect("the detail probe");
        assert!(probe.probe, "{topology:?}");
        assert!(gate.acquire_probing(Deadline::NONE, wait, detail).await.is_err());
        // The probe ended with no answer about the key: the next call probes at once.
        assert!(health.probe_over(probe.granted_at_us).await.expect("over"));
        assert!(!health.probe_over(probe.granted_at_us).await.expect("once"));
        let next = gate
            .acquire_probing(Deadline::NONE, wait, detail)
            .await
            .expect("probes at once");
        assert!(next.probe, "{topology:?}");
        // The circuit expires (nothing refused it for its keep): the probe ends with it.
        let _: () = redis::cmd("DEL")
            .arg(health.key())
            .query_async(&mut conn)
            .await
            .expect("del");
        let g = gate
            .acquire_probing(Deadline::NONE, wait, detail)
            .await
            .expect("no circuit, no probe");
        assert!(!g.probe, "{topology:?}");
        let _: () = redis::cmd("DEL")
            .arg(gate.key())
            .query_async(&mut conn)
            .await
            .expect("del");
    }
}

/// A caller for an API the circuit holds is refused in one round trip and reserves
/// nothing: the search that asks next gets the slot right after the last one, not one a
/// refused detail call kept, on every Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_api_takes_no_slot_from_the_others() {
    use lawsync::gate::Probe;
    let window = Duration::from_millis(1200);
    let search = Probe {
        endpoint: "search",
        window,
    };
    let detail = Probe {
        endpoint: "detail",
        window,
    };
    let wait = Duration::from_millis(800);
    for topology in Topology::EVERY {
        let mut conn = topology.connect().await;
        let (gate, health) = circuit_on(conn.clone());
        let gate = Arc::new(gate);
        let pace = gate.config().interval + gate.config().tolerance;
        let refusal = KeyProblem::NotApplied { format: None };
        refuse(&health, &gate, refusal, Endpoint::Detail).await;
        let first = gate
            .acquire_probing(Deadline::NONE, wait, search)
            .await
            .expect("a search, not held");
        // The gate is busy (a search just started): a detail call is still refused at once.
        let before = gate.stats().round_trips;
        let held = gate.acquire_probing(Deadline::NONE, wait, detail).await;
        assert!(
            matches!(
                held,
                Err(lawsync::GateError::WaitTooLong {
                    cause: lawsync::Refusal::Circuit { .. },
                    ..
                })
            ),
            "{topology:?}: {held:?}"
        );
        assert_eq!(
            gate.stats().round_trips - before,
            1,
            "{topology:?}: a held detail call waited for a slot before being refused"
        );
        // A detail call and a search from two instances at once: the search's slot is the
        // one right after the first search.
        let g = gate.clone();
        let refused = tokio::spawn(async move { g.acquire_probing(Deadline::NONE, wait, detail).await });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let next = gate
            .acquire_probing(Deadline::NONE, wait, search)
            .await
            .expect("the next search");
        assert!(refused.await.expect("task").is_err(), "{topology:?}");
        let gap = Duration::from_micros(next.granted_at_us - first.granted_at_us);
        assert!(
            gap < pace * 2,
            "{topology:?}: {gap:?} between two searches: a held detail call kept a slot (pace {pace:?})"
        );
        for key in [gate.key(), health.key()] {
            let _: () = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .expect("del");
        }
    }
}

/// A refusal of one API while its probe is out (another call's answer, or a hold shorter
/// than the window) keeps the probe's window: a second probe never starts beside it.
#[tokio::test]
async fn a_short_hold_never_cuts_a_probe_in_flight_short() {
    use lawsync::gate::Probe;
    let window = Duration::from_millis(1500);
    let detail = Probe {
        endpoint: "detail",
        window,
    };
    let short = Duration::from_millis(100);
    let wait = Duration::from_millis(300);
    for topology in Topology::EVERY {
        let conn = topology.connect().await;
        let (gate, health) = circuit_on(conn.clone());
        let refusal = KeyProblem::NotApplied { format: None };
        health
            .refused(&refusal, Endpoint::Detail, &gate, short)
            .await
            .expect("refused");
        tokio::time::sleep(short + Duration::from_millis(20)).await;
        let probe = gate
            .acquire_probing(Deadline::NONE, wait, detail)
            .await
            .expect("the probe");
        assert!(probe.probe, "{topology:?}");
        health
            .refused(&refusal, Endpoint::Detail, &gate, short)
            .await
            .expect("refused again");
        tokio::time::sleep(short + Duration::from_millis(20)).await;
        let beside = gate.acquire_probing(Deadline::NONE, wait, detail).await;
        assert!(
            beside.is_err(),
            "{topology:?}: a second probe inside the first one's window: {beside:?}"
        );
        let held = health.status().await.expect("status").expect("open");
        assert!(
            held.held_until_us >= Some(probe.granted_at_us + window.as_micros() as u64),
            "{topology:?}: {held:?}"
        );
    }
}

/// Two instances, a probe slower than the interval: the other instance is held off until
/// the probe's answer is in, so law.go.kr sees one probe and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_probe_holds_every_other_instance_off() {
    let refusal = include_str!("../../shared/tests/fixtures/replies/verify-failed.json");
    let detail = r#"{"PrecService":{"판례정보일련번호":"7","사건명":"x"}}"#;
    let up = Upstream::start(
        vec![
            Reply::json(refusal),
            Reply::json(detail).delayed(Duration::from_millis(1500)),
        ],
        Reply::json(detail),
    )
    .await;
    let ns = unique_ns("slow-probe");
    let extra = [
        ("LAW_API_CONNECT_TIMEOUT_MS", "500"),
        ("LAW_API_READ_TIMEOUT_MS", "3000"),
        ("LAW_API_MAX_WAIT_MS", "200"),
    ];
    let hold = Duration::from_millis(300);
    let a = client(&up.base_url, OC, &extra, &ns)
        .await
        .with_key_probe_interval(hold);
    let b = client(&up.base_url, OC, &extra, &ns)
        .await
        .with_key_probe_interval(hold);
    let e = a.detail("7", Deadline::NONE).await.expect_err("refused");
    assert_eq!(e, LawError::KeyRefused(KeyProblem::VerifyFailed));
    tokio::time::sleep(hold + Duration::from_millis(50)).await;
    let probe = tokio::spawn(async move { a.detail("7", Deadline::NONE).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let beside = b.detail("8", Deadline::NONE).await;
    assert!(
        matches!(beside, Err(LawError::Gate(_))),
        "a call beside the probe: {beside:?}"
    );
    probe.await.expect("task").expect("the probe is answered");
    assert_eq!(up.seen().len(), 2, "one refusal and one probe reached law.go.kr");
    assert_eq!(b.health().status().await.expect("status"), None, "closed");
}

/// The probe's own call is cut at its window, so two are never out at once: a reply that
/// trickles past it (never pausing long enough for the read timeout) ends as a timeout,
/// the probe is over, and the retry probes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_is_cut_at_its_window() {
    let refusal = include_str!("../../shared/tests/fixtures/replies/verify-failed.json");
    let detail = r#"{"PrecService":{"판례정보일련번호":"7","사건명":"x"}}"#;
    let trickle = Body::Trickle {
        body: detail.as_bytes().to_vec(),
        parts: 6,
        every: Duration::from_millis(800),
    };
    let up = Upstream::start(
        vec![Reply::json(refusal), Reply::status(200).with_body(trickle)],
        Reply::json(detail),
    )
    .await;
    // A window of 200 + 1000 ms + the margin: 3.2 s, against a reply of 4.8 s.
    let extra = [
        ("LAW_API_CONNECT_TIMEOUT_MS", "200"),
        ("LAW_API_READ_TIMEOUT_MS", "1000"),
    ];
    let hold = Duration::from_millis(200);
    let seen = Arc::new(Seen::default());
    let c = client(&up.base_url, OC, &extra, &unique_ns("cut"))
        .await
        .with_key_probe_interval(hold)
        .with_observer(seen.clone());
    let e = c.detail("7", Deadline::NONE).await.expect_err("refused");
    assert_eq!(e, LawError::KeyRefused(KeyProblem::VerifyFailed));
    tokio::time::sleep(hold + Duration::from_millis(20)).await;
    c.detail("7", Deadline::NONE)
        .await
        .expect("the retry after the cut probe");
    let events = seen.0.lock().expect("events").clone();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[1].status, None, "the trickling probe was cut: {events:?}");
    assert!(
        events[1].took < Duration::from_millis(3200),
        "cut at its window: {:?}",
        events[1].took
    );
    assert_eq!(
        c.health().status().await.expect("status"),
        None,
        "closed by the retry"
    );
}

/// A probe answered "not applied for in this format" with `LAW_API_FORMAT=auto`: the call
/// in the other format is not held behind its own probe, and its answer closes the circuit.
#[tokio::test]
async fn a_probe_refused_one_format_asks_in_the_other_at_once() {
    let refusal = include_str!("../../shared/tests/fixtures/replies/verify-failed.json");
    let not_applied = include_str!("../../shared/tests/fixtures/replies/not-applied.html");
    let detail_xml = include_str!("../../shared/tests/fixtures/replies/detail.xml");
    let up = Upstream::start(
        vec![
            Reply::json(refusal),
            Reply::status(200).text(not_applied),
            Reply::status(200)
                .header("Content-Type", "application/xml")
                .text(detail_xml),
        ],
        Reply::status(500),
    )
    .await;
    // A handler's wait bound: about one interval.
    let extra = [("LAW_API_MAX_WAIT_MS", "200")];
    let hold = Duration::from_millis(200);
    let c = client(&up.base_url, OC, &extra, &unique_ns("switch"))
        .await
        .with_key_probe_interval(hold);
    let e = c.detail("7", Deadline::NONE).await.expect_err("refused");
    assert_eq!(e, LawError::KeyRefused(KeyProblem::VerifyFailed));
    tokio::time::sleep(hold + Duration::from_millis(20)).await;
    let id = detail_xml_id(detail_xml);
    c.detail(&id, Deadline::NONE).await.expect("asked in XML at once");
    assert_eq!(up.seen().len(), 3);
    assert_eq!(c.health().status().await.expect("status"), None, "closed");
}

/// The precedent id in a detail fixture.
fn detail_xml_id(xml: &str) -> String {
    let start = xml.find("<판례정보일련번호>").expect("an id") + "<판례정보일련번호>".len();
    let end = start + xml[start..].find('<').expect("its end");
    xml[start..end].trim().to_owned()
}

/// law.go.kr refused the detail API alone: the drainer releases the detail jobs it meets,
/// due at the probe with no attempt counted, and goes on with the search jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_api_holds_its_jobs_and_the_drainer_goes_on_with_the_others() {
    let rig = MirrorRig::start_with(Store::Folder, Queues::Memory, 27, Some("20260227")).await;
    let health = rig.deps.law.health();
    let refusal = KeyProblem::NotApplied { format: None };
    health
        .refused(&refusal, Endpoint::Detail, rig.deps.law.gate(), HOLD)
        .await
        .expect("refused");
    let note = || lawsync::queue::ErrorNote::now("test", "parked by the test", None);
    for id in ["100001", "100002"] {
        rig.deps
            .queue
            .enqueue_due_in(&lawsync::queue::Job::detail(id), Duration::ZERO, note())
            .await
            .expect("enqueue");
    }
    let search = lawsync::queue::Job::search(&window());
    rig.deps
        .queue
        .enqueue_due_in(&search, Duration::ZERO, note())
        .await
        .expect("enqueue");
    let before = rig.arrivals_len();
    rig.drain(1).await;
    let calls: Vec<String> = rig.lookalike.arrivals()[before..]
        .iter()
        .map(|a| a.endpoint.clone())
        .collect();
    assert!(
        calls.contains(&"search".to_owned()),
        "the search went on: {calls:?}"
    );
    assert!(
        !calls.contains(&"detail".to_owned()),
        "a held detail was called: {calls:?}"
    );
    let left = rig.deps.queue.list(50).await.expect("list");
    for id in ["100001", "100002"] {
        let entry = left
            .iter()
            .find(|e| e.job.as_ref().is_some_and(|j| j.identity == id))
            .unwrap_or_else(|| panic!("detail {id} kept: {left:?}"));
        assert_eq!(entry.retry_count, 0, "no attempt counted: {entry:?}");
    }
}
