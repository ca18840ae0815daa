//! The law.go.kr client's connections: opened before the gate's grant, reused while young,
//! replaced before the grant when the server closed them, over plain HTTP and over TLS.
//!
//! The gate spaces grants on Redis' clock; law.go.kr sees arrivals. A handshake between
//! the grant and the request would move one arrival later than the next one's, so these
//! tests give the server a slow TLS handshake and check on the host's one clock (Redis
//! runs here too) that every grant came after its connection was up. A refused
//! connection spending no grant is in client.rs (`network_failures_are_retried_…`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lawsync::config::Config;
use lawsync::law::{CallEvent, CallObserver, KeyProblem, LawError, TlsProblem};
use lawsync::{Deadline, Gate, LawClient, Secret};
use lawsync_tests::servers::{Topology, unique_ns};
use lawsync_tests::upstream::{Reply, Upstream};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

const OC: &str = "oc-SECRET-c0nn3c7";
/// The server's pause before it takes part in a TLS handshake: far above any scheduling
/// noise, so "the grant came after the handshake" cannot hold by luck.
const SLOW_HANDSHAKE: Duration = Duration::from_millis(300);

fn detail_body(id: &str) -> String {
    format!(
        r#"{{"PrecService":{{"판례정보일련번호":"{id}","사건명":"손해배상","사건번호":"2025다1","선고일자":"20260105","법원명":"대법원","판례내용":"본문"}}}}"#
    )
}

#[derive(Debug, Default)]
struct Calls(Mutex<Vec<CallEvent>>);

impl CallObserver for Calls {
    fn observe(&self, event: &CallEvent) {
        self.0.lock().expect("calls").push(event.clone());
    }
}

async fn client(base: &str, extra: &[(&str, &str)]) -> (LawClient, Arc<Calls>) {
    lawsync_tests::capture::capture_global();
    let mut vars: Vec<(String, String)> = vec![
        ("LAW_API_OC".into(), OC.into()),
        ("LAW_API_BASE_URL".into(), base.into()),
        // Wide enough that concurrent calls get distinct slots well apart.
        ("LAW_API_REQUEST_INTERVAL_MS".into(), "50".into()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let cfg = Config::from_lookup(|k| vars.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        .expect("config");
    let gate = Arc::new(Gate::new(
        Topology::Standalone.connect().await,
        &unique_ns("connections"),
        cfg.gate,
    ));
    let calls = Arc::new(Calls::default());
    let client = LawClient::new(&cfg.law, Secret::new(OC), gate)
        .expect("client")
        .with_observer(calls.clone());
    (client, calls)
}

fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).expect("after 1970").as_micros() as u64
}

#[tokio::test]
async fn sequential_calls_share_one_connection() {
    let up = Upstream::start(vec![], Reply::json(detail_body("1"))).await;
    let (client, _) = client(&up.base_url, &[]).await;
    for _ in 0..3 {
        client.detail("1", Deadline::NONE).await.expect("detail");
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter().all(|s| s.connection == 1),
        "{:?}",
        seen.iter().map(|s| s.connection).collect::<Vec<_>>()
    );
    assert_eq!(up.connections(), 1);
}

#[tokio::test]
async fn a_connection_the_server_closes_is_replaced_before_the_next_grant() {
    // One reply says `Connection: close`; the server then hangs up, as law.go.kr may.
    let up = Upstream::start(
        vec![Reply::json(detail_body("1")).closing()],
        Reply::json(detail_body("1")),
    )
    .await;
    let (client, calls) = client(&up.base_url, &[("LAW_API_MAX_ATTEMPTS", "1")]).await;
    client.detail("1", Deadline::NONE).await.expect("first");
    client
        .detail("1", Deadline::NONE)
        .await
        .expect("second: a new connection, not a failed send");
    let seen = up.seen();
    assert_eq!(seen.iter().map(|s| s.connection).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(
        calls.0.lock().expect("calls").len(),
        2,
        "one grant and one call each"
    );
    assert_eq!(client.gate().stats().grants - client.gate().stats().given_back, 2);
}

#[tokio::test]
async fn a_connection_closed_while_idle_is_replaced_not_sent_on() {
    // A keep-alive timeout: the server drops a connection idle for 100 ms, saying nothing.
    let up = Upstream::start(vec![], Reply::json(detail_body("1"))).await;
    up.close_idle_after(Duration::from_millis(100));
    let (client, _) = client(&up.base_url, &[("LAW_API_MAX_ATTEMPTS", "1")]).await;
    client.detail("1", Deadline::NONE).await.expect("first");
    tokio::time::sleep(Duration::from_millis(400)).await;
    // With one attempt, a request written into the closed connection would fail here.
    client.detail("1", Deadline::NONE).await.expect("second");
    assert_eq!(
        up.seen().iter().map(|s| s.connection).collect::<Vec<_>>(),
        vec![1, 2]
    );
}

/// Takes the gate's next slot, as another instance calling law.go.kr would, so that the
/// client's next call waits one interval for its own.
async fn occupy_gate(client: &LawClient) {
    client
        .gate()
        .acquire(Deadline::NONE)
        .await
        .expect("another instance's slot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_that_ages_during_the_gate_wait_is_replaced_after_the_grant() {
    // The server's keep-alive is 5 s. A connection idle 3.5 s (under the 4 s reuse limit)
    // is taken, then held 2 s for the slot: at the grant it is 5.5 s idle and closed.
    let up = Upstream::start(vec![], Reply::json(detail_body("1"))).await;
    up.close_idle_after(Duration::from_secs(5));
    let slow = [
        ("LAW_API_REQUEST_INTERVAL_MS", "2000"),
        ("LAW_API_MAX_ATTEMPTS", "1"),
    ];
    let (client, calls) = client(&up.base_url, &slow).await;
    client.detail("1", Deadline::NONE).await.expect("first");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    occupy_gate(&client).await;
    client
        .detail("1", Deadline::NONE)
        .await
        .expect("the grant went back unsent and the call went on a new connection");
    assert_eq!(
        up.seen().iter().map(|s| s.connection).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let events = calls.0.lock().expect("calls").clone();
    assert_eq!(events.len(), 2, "no failed attempt: {events:?}");
    assert_eq!(
        events[1].given_back, 1,
        "the aged connection's grant was given back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_dropped_during_the_gate_wait_spends_no_grant() {
    // A server drops a connection that sends nothing for 1 s (a request-header timeout,
    // scaled down); the call waits 2 s for its slot.
    let up = Upstream::start(vec![], Reply::json(detail_body("1"))).await;
    up.close_idle_after(Duration::from_secs(1));
    let slow = [
        ("LAW_API_REQUEST_INTERVAL_MS", "2000"),
        ("LAW_API_MAX_ATTEMPTS", "1"),
    ];
    let (client, _) = client(&up.base_url, &slow).await;
    occupy_gate(&client).await;
    client
        .detail("1", Deadline::NONE)
        .await
        .expect("sent on a new connection");
    assert_eq!(up.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_put_back_after_a_refusal_keeps_its_idle_age() {
    let up = Upstream::start(vec![], Reply::json(detail_body("1"))).await;
    let slow = [
        ("LAW_API_REQUEST_INTERVAL_MS", "2000"),
        ("LAW_API_MAX_ATTEMPTS", "1"),
    ];
    let (client, _) = client(&up.base_url, &slow).await;
    client.detail("1", Deadline::NONE).await.expect("first");
    // A handler's short bound; clones share the pool.
    let client = client.with_gate_wait(Duration::from_millis(100));
    tokio::time::sleep(Duration::from_secs(3)).await;
    occupy_gate(&client).await;
    let refused = client.detail("1", Deadline::NONE).await;
    assert!(
        refused.is_err(),
        "the slot is 2 s away, the bound 100 ms: {refused:?}"
    );
    tokio::time::sleep(Duration::from_millis(2200)).await;
    client.detail("1", Deadline::NONE).await.expect("third");
    assert_eq!(
        up.seen().iter().map(|s| s.connection).collect::<Vec<_>>(),
        vec![1, 2],
        "connection 1 was 5.2 s idle, past the 4 s reuse limit"
    );
}

/// A CA and a certificate for `localhost` made for this run, the CA written to a file.
struct TestPki {
    ca_file: std::path::PathBuf,
    server: ServerConfig,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A directory removed when dropped.
    #[derive(Debug)]
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new(tag: &str) -> Self {
            let p =
                std::env::temp_dir().join(format!("lawsync-{tag}-{}-{}", std::process::id(), rand_suffix()));
            std::fs::create_dir_all(&p).expect("temp dir");
            Self(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn rand_suffix() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

fn pki() -> TestPki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "lawsync test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("ca key")).expect("ca");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("leaf params")
        .signed_by(&leaf_key, &ca)
        .expect("leaf");
    let dir = tempdir::Dir::new("pki");
    let ca_file = dir.0.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).expect("write CA");
    let server = serving(&leaf, &leaf_key);
    TestPki {
        ca_file,
        server,
        _dir: dir,
    }
}

/// A TLS server presenting `leaf` alone (no chain), signed with `key`.
fn serving(leaf: &rcgen::Certificate, key: &KeyPair) -> ServerConfig {
    ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from(leaf.der().to_vec())],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .expect("server config")
}

/// What the HTTPS server saw, on the host's wall clock.
#[derive(Debug, Default)]
struct TlsSeen {
    /// When each connection's TLS handshake completed, by connection (0-based).
    handshaken: Vec<SystemTime>,
    /// Each request: its connection and when its head arrived.
    requests: Vec<(usize, SystemTime)>,
}

/// An HTTPS law.go.kr that waits [`SLOW_HANDSHAKE`] before each handshake and answers
/// every request with one detail, keeping connections open.
async fn slow_tls_upstream(server: ServerConfig) -> (String, Arc<Mutex<TlsSeen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let seen = Arc::new(Mutex::new(TlsSeen::default()));
    let st = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, st) = (acceptor.clone(), st.clone());
            tokio::spawn(async move {
                tokio::time::sleep(SLOW_HANDSHAKE).await;
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let connection = {
                    let mut s = st.lock().expect("seen");
                    s.handshaken.push(SystemTime::now());
                    s.handshaken.len() - 1
                };
                let mut buf = Vec::new();
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        let mut chunk = [0u8; 4096];
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    st.lock()
                        .expect("seen")
                        .requests
                        .push((connection, SystemTime::now()));
                    buf.clear();
                    let body = detail_body("7");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if tls.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("https://localhost:{port}"), seen)
}

#[tokio::test]
async fn over_tls_every_grant_comes_after_its_handshake() {
    let pki = pki();
    let (base, seen) = slow_tls_upstream(pki.server.clone()).await;
    let ca = pki.ca_file.to_string_lossy().into_owned();
    let (client, calls) = client(&base, &[("LAW_API_CA_FILE", &ca), ("LAW_API_MAX_ATTEMPTS", "1")]).await;
    // Two at once need two connections, both new; the third reuses one.
    let (a, b) = tokio::join!(
        client.detail("7", Deadline::NONE),
        client.detail("7", Deadline::NONE)
    );
    a.expect("first");
    b.expect("second");
    client.detail("7", Deadline::NONE).await.expect("third");

    let seen = seen.lock().expect("seen");
    assert_eq!(
        seen.handshaken.len(),
        2,
        "two connections for three calls: {seen:?}"
    );
    assert_eq!(seen.requests.len(), 3);
    let mut grants: Vec<u64> = calls
        .0
        .lock()
        .expect("calls")
        .iter()
        .map(|c| c.granted_at_us)
        .collect();
    grants.sort_unstable();
    assert_eq!(grants.len(), 3);
    // Requests arrive in grant order: the gate spaces them 50 ms apart.
    let mut requests = seen.requests.clone();
    requests.sort_by_key(|(_, at)| *at);
    for ((connection, arrived), granted_us) in requests.iter().zip(&grants) {
        let handshaken = micros(seen.handshaken[*connection]);
        assert!(
            *granted_us >= handshaken,
            "a grant came {} µs before its connection's handshake finished",
            handshaken - granted_us
        );
        // Granting after the 300 ms handshake, the arrival follows within a write.
        let grant_to_arrival = micros(*arrived).saturating_sub(*granted_us);
        assert!(
            grant_to_arrival < SLOW_HANDSHAKE.as_micros() as u64 / 2,
            "{grant_to_arrival} µs from grant to arrival: the handshake was inside it"
        );
    }
}

#[tokio::test]
async fn an_untrusted_certificate_fails_to_connect_and_spends_no_grant() {
    let pki = pki();
    let (base, seen) = slow_tls_upstream(pki.server.clone()).await;
    // No LAW_API_CA_FILE: the system's roots do not know the test CA.
    let (client, _) = client(&base, &[("LAW_API_MAX_ATTEMPTS", "1")]).await;
    let captured = lawsync_tests::capture::capture_global();
    let err = client.detail("7", Deadline::NONE).await.expect_err("untrusted");
    // Named as a certificate problem, with what to do; the key-health circuit opens (no
    // retry can fix a certificate), and nothing is ever sent without TLS.
    assert_eq!(
        err,
        LawError::KeyRefused(KeyProblem::Tls {
            problem: TlsProblem::UnknownIssuer
        }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("certificate could not be verified")
            && text.contains("incomplete chain")
            && text.contains("LAW_API_CA_FILE")
            && text.contains("never switch to http"),
        "{text}"
    );
    assert_eq!(client.gate().stats().grants, 0);
    let open = client.health().status().await.expect("status").expect("open");
    assert_eq!(open.reason, "tls_unknown_issuer");
    assert!(seen.lock().expect("seen").requests.is_empty());
    // The cause is logged, and neither it nor rustls' own records (the `log` crate's,
    // bridged into the same capture) carry the key.
    let log = captured.text();
    assert!(
        log.contains("TLS handshake failed") && log.contains("UnknownIssuer"),
        "{log}"
    );
    assert!(
        log.contains("\"log.target\":\"rustls"),
        "rustls' records are captured too"
    );
    assert!(!log.contains(OC) && !format!("{err:?}").contains(OC));
}

/// A server that sends its leaf without the intermediate that signed it: rustls does not
/// fetch the missing intermediate (browsers do), so the chain does not reach the trusted
/// root. Named as such; with the intermediate in `LAW_API_CA_FILE`, the calls go through.
#[tokio::test]
async fn an_incomplete_chain_is_named_and_completed_by_the_ca_file() {
    let chain = incomplete_chain();
    let (base, seen) = slow_tls_upstream(chain.server.clone()).await;
    let root_only = [
        ("LAW_API_CA_FILE", chain.root_file.to_str().expect("path")),
        ("LAW_API_MAX_ATTEMPTS", "1"),
    ];
    let (refused, _) = client(&base, &root_only).await;
    let err = refused
        .detail("7", Deadline::NONE)
        .await
        .expect_err("incomplete chain");
    assert_eq!(
        err,
        LawError::KeyRefused(KeyProblem::Tls {
            problem: TlsProblem::UnknownIssuer
        })
    );
    assert!(err.to_string().contains("LAW_API_CA_FILE"), "{err}");
    assert!(seen.lock().expect("seen").requests.is_empty(), "nothing sent");
    let completed = [("LAW_API_CA_FILE", chain.with_intermediate.to_str().expect("path"))];
    let (completed, _) = client(&base, &completed).await;
    let doc = completed
        .detail("7", Deadline::NONE)
        .await
        .expect("the chain completed by the file");
    assert_eq!(doc.id, "7");
}

/// A root, an intermediate it signed, and a leaf for `localhost` the intermediate signed;
/// the server presents the leaf alone.
struct IncompleteChain {
    server: ServerConfig,
    root_file: std::path::PathBuf,
    with_intermediate: std::path::PathBuf,
    _dir: tempdir::Dir,
}

fn incomplete_chain() -> IncompleteChain {
    let ca = |name: &str| {
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p
    };
    let root = CertifiedIssuer::self_signed(ca("lawsync test root"), KeyPair::generate().expect("key"))
        .expect("root");
    let intermediate = CertifiedIssuer::signed_by(
        ca("lawsync test intermediate"),
        KeyPair::generate().expect("key"),
        &root,
    )
    .expect("intermediate");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("leaf params")
        .signed_by(&leaf_key, &intermediate)
        .expect("leaf");
    let dir = tempdir::Dir::new("chain");
    let root_file = dir.0.join("root.pem");
    std::fs::write(&root_file, root.pem()).expect("write root");
    let with_intermediate = dir.0.join("root-and-intermediate.pem");
    std::fs::write(
        &with_intermediate,
        format!("{}{}", root.pem(), intermediate.pem()),
    )
    .expect("write both");
    let server = serving(&leaf, &leaf_key);
    IncompleteChain {
        server,
        root_file,
        with_intermediate,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_bad_ca_file_is_named_at_start() {
    let dir = tempdir::Dir::new("badca");
    let not_pem = dir.0.join("not.pem");
    std::fs::write(&not_pem, "just text\n").expect("write");
    let missing = dir.0.join("missing.pem");
    for (path, says) in [(&not_pem, "no CERTIFICATE"), (&missing, "cannot be read")] {
        let cfg = Config::from_lookup(|k| match k {
            "LAW_API_OC" => Some(OC.into()),
            "LAW_API_CA_FILE" => Some(path.to_string_lossy().into_owned()),
            _ => None,
        })
        .expect("config");
        let gate = Arc::new(Gate::new(
            Topology::Standalone.connect().await,
            &unique_ns("connections"),
            cfg.gate,
        ));
        let err = LawClient::new(&cfg.law, Secret::new(OC), gate).expect_err("bad CA file");
        let text = err.to_string();
        assert!(text.contains("LAW_API_CA_FILE") && text.contains(says), "{text}");
        assert!(!text.contains(OC));
    }
}
