//! HTTP to law.go.kr: connections opened before the gate grants a slot, and one attempt
//! on such a connection, reduced to an [`Attempt`] that holds no URL.
//!
//! The gate spaces call *starts* on Redis' clock; law.go.kr judges *arrivals*. Whatever
//! lies between a grant and the request's arrival is added to one call and not to the
//! next, so it eats the margin between the configured interval and the rule. A new
//! connection is a TCP and a TLS handshake: from a Lambda behind a NAT gateway to Korea,
//! tens to hundreds of milliseconds, more than the default 50 ms margin. So a call first
//! takes a ready connection (a pooled one, or a new one opened now), and only then asks
//! the gate; the grant is followed by one write and half a round trip. A connection that
//! cannot be opened costs no grant: nothing was sent.
//!
//! The request line carries the key (`OC`), so no error here keeps a URL or a request:
//! every failure is classified to a [`NetKind`] and dropped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{ACCEPT, CONTENT_LENGTH, HOST, HeaderMap, HeaderValue, REFERER, RETRY_AFTER, USER_AGENT};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use url::{Host, Position, Url};

use super::error::{Endpoint, LawError, NetKind};
use super::format::Format;
use super::refusals::TlsProblem;
use super::retry_after::parse_retry_after;
use crate::config::LawApiConfig;
use crate::deadline::Deadline;
use crate::policy::{HTTP_IDLE_REUSE, HTTP_MAX_IDLE};
use crate::secret::Secret;

/// What one attempt produced.
#[derive(Debug)]
pub(super) enum Attempt {
    /// HTTP 2xx with a body within the limit.
    Body(Vec<u8>),
    /// Any other status; the body is not read.
    Status {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// The connection failed or timed out before a complete reply.
    Network(NetKind),
    /// A failure that retrying will not fix (oversized or empty body).
    Fatal(LawError),
}

/// A connection ready to carry one request, taken before the grant.
pub(super) struct Connection {
    sender: SendRequest<Empty<Bytes>>,
    /// Opened for this call, not taken from the pool.
    pub(super) fresh: bool,
    /// When it last carried a reply, or was opened: its idle age counts from here.
    since: Instant,
}

impl Connection {
    /// Still fit to carry a request after the gate wait: not closed by the server
    /// meanwhile. Its age is not held against it here: a wait at the gate can be many
    /// intervals long with many callers, and a connection given back for its age would
    /// age again in the next wait. The idle limit applies when it is taken from the pool.
    pub(super) fn fit(&self) -> bool {
        !self.sender.is_closed()
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

/// The HTTP side of the client: where law.go.kr is, how to reach it, and the idle
/// connections kept for the next calls. Clones share the pool.
#[derive(Clone)]
pub(super) struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    /// The DRF base, ending in '/'.
    base: Url,
    host: Host<String>,
    port: u16,
    /// Present for `https`: the TLS client and the name the certificate must carry.
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Sent with every request: Host, Referer, User-Agent, Accept.
    headers: HeaderMap,
    connect_timeout: Duration,
    read_timeout: Duration,
    max_body: u64,
    /// Idle connections, the most recently used last, each with when it went idle.
    idle: Mutex<Vec<(SendRequest<Empty<Bytes>>, Instant)>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The base URL holds no key (the key goes into each request's query only).
        f.debug_struct("Transport")
            .field("base", &self.inner.base.as_str())
            .field("tls", &self.inner.tls.is_some())
            .field("max_body", &self.inner.max_body)
            .finish_non_exhaustive()
    }
}

impl Transport {
    pub(super) fn new(cfg: &LawApiConfig) -> Result<Self, LawError> {
        let header = |v: &str| {
            HeaderValue::from_str(v)
                .map_err(|_| LawError::InvalidRequest("header value is not printable ASCII".into()))
        };
        // `Url::join` replaces the last path segment unless the base ends in '/'.
        let mut base = cfg.base_url.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let host = base
            .host()
            .map(|h| h.to_owned())
            .ok_or_else(|| LawError::InvalidRequest("base URL has no host".into()))?;
        let port = base
            .port_or_known_default()
            .ok_or_else(|| LawError::InvalidRequest("base URL has no port".into()))?;
        let tls = match base.scheme() {
            "http" => None,
            "https" => Some(tls_for(&host, cfg.ca_file.as_deref())?),
            _ => return Err(LawError::InvalidRequest("base URL must be http or https".into())),
        };
        let mut headers = HeaderMap::new();
        // host_str keeps an IPv6 address's brackets; the port only when not the default.
        let authority = match base.port() {
            Some(p) => format!("{}:{p}", base.host_str().unwrap_or_default()),
            None => base.host_str().unwrap_or_default().to_owned(),
        };
        headers.insert(HOST, header(&authority)?);
        headers.insert(REFERER, header(&cfg.referer)?);
        headers.insert(USER_AGENT, header(&cfg.user_agent)?);
        Ok(Self {
            inner: Arc::new(Inner {
                base,
                host,
                port,
                tls,
                headers,
                connect_timeout: cfg.connect_timeout,
                read_timeout: cfg.read_timeout,
                max_body: cfg.max_response_bytes,
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// A connection ready to send on: the most recently used idle one that is young and
    /// still open, or a new one. Bounded by the connect timeout and the deadline.
    pub(super) async fn connection(&self, deadline: Deadline) -> Result<Connection, NetKind> {
        let bound = deadline.cap(self.inner.connect_timeout);
        let ready = async {
            while let Some((mut sender, since)) = self.take_idle() {
                // An idle HTTP/1 connection is ready at once unless the server closed it.
                if sender.ready().await.is_ok() {
                    return Ok(Connection {
                        sender,
                        fresh: false,
                        since,
                    });
                }
            }
            self.open().await.map(|sender| Connection {
                sender,
                fresh: true,
                since: Instant::now(),
            })
        };
        match tokio::time::timeout(bound, ready).await {
            Ok(result) => result,
            Err(_) => Err(NetKind::Timeout),
        }
    }

    fn take_idle(&self) -> Option<(SendRequest<Empty<Bytes>>, Instant)> {
        let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
        // Kept in the order they went idle: the stale ones are a prefix.
        if let Some(fresh_from) = idle
            .iter()
            .rposition(|(_, since)| since.elapsed() > HTTP_IDLE_REUSE)
        {
            idle.drain(..=fresh_from);
        }
        idle.pop()
    }

    /// Puts back a connection taken but not used (the gate refused the slot), with the
    /// idle age it had: being taken carried no reply.
    pub(super) fn release(&self, conn: Connection) {
        self.keep(conn.sender, conn.since);
    }

    fn keep(&self, sender: SendRequest<Empty<Bytes>>, since: Instant) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
        // In the order they went idle, so the stale ones stay a prefix.
        let at = idle.partition_point(|(_, s)| *s <= since);
        idle.insert(at, (sender, since));
        if idle.len() > HTTP_MAX_IDLE {
            idle.remove(0);
        }
    }

    /// TCP (the addresses the host resolves to, in order), TLS for `https`, then the
    /// HTTP/1.1 handshake; the connection's driver runs as its own task.
    async fn open(&self) -> Result<SendRequest<Empty<Bytes>>, NetKind> {
        let inner = &self.inner;
        let tcp = match &inner.host {
            Host::Domain(name) => {
                let addrs: Vec<_> = tokio::net::lookup_host((name.as_str(), inner.port))
                    .await
                    .map_err(|_| NetKind::Connect)?
                    .collect();
                // Each address gets its share of the connect timeout, so one that never
                // answers cannot use up the time of the others.
                let share = inner.connect_timeout / addrs.len().max(1) as u32;
                let mut stream = None;
                for addr in addrs {
                    if let Ok(Ok(s)) = tokio::time::timeout(share, TcpStream::connect(addr)).await {
                        stream = Some(s);
                        break;
                    }
                }
                stream.ok_or(NetKind::Connect)?
            }
            Host::Ipv4(ip) => TcpStream::connect((*ip, inner.port))
                .await
                .map_err(|_| NetKind::Connect)?,
            Host::Ipv6(ip) => TcpStream::connect((*ip, inner.port))
                .await
                .map_err(|_| NetKind::Connect)?,
        };
        // A request is one small write; waiting to coalesce it only delays the arrival.
        let _ = tcp.set_nodelay(true);
        let sender = match &inner.tls {
            None => handshake(tcp).await?,
            Some((connector, name)) => {
                let tls = connector.connect(name.clone(), tcp).await.map_err(|e| {
                    // rustls' reason (an unknown issuer, a wrong name) holds no URL or key.
                    tracing::warn!(error = %e, "law.go.kr: TLS handshake failed");
                    tls_failure(&e)
                })?;
                handshake(tls).await?
            }
        };
        Ok(sender)
    }

    /// Sends one request on `conn` and reads the reply. The connection goes back to the
    /// pool only after a complete 2xx body: any other outcome closes it, so a half-read
    /// reply can never be mistaken for the next call's.
    pub(super) async fn attempt(
        &self,
        conn: Connection,
        endpoint: Endpoint,
        format: Format,
        oc: &Secret,
        params: &[(&'static str, String)],
        deadline: Deadline,
    ) -> Attempt {
        let Ok(mut url) = self.inner.base.join(endpoint.path()) else {
            return Attempt::Fatal(LawError::InvalidRequest(
                "base URL cannot take the DRF path".into(),
            ));
        };
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("OC", oc.expose())
                .append_pair("target", "prec")
                .append_pair("type", format.param());
            for (k, v) in params {
                q.append_pair(k, v);
            }
        }
        let mut request = Request::new(Empty::<Bytes>::new());
        let Ok(target) = url[Position::BeforePath..].parse() else {
            return Attempt::Fatal(LawError::InvalidRequest(
                "request target is not a valid URI".into(),
            ));
        };
        *request.uri_mut() = target;
        *request.headers_mut() = self.inner.headers.clone();
        request.headers_mut().insert(
            ACCEPT,
            HeaderValue::from_static(match format {
                Format::Json => "application/json",
                Format::Xml => "application/xml",
            }),
        );
        let exchange = self.exchange(conn, request);
        match deadline.usable() {
            None => exchange.await,
            Some(left) => tokio::time::timeout(left.max(Duration::from_millis(1)), exchange)
                .await
                .unwrap_or(Attempt::Network(NetKind::Timeout)),
        }
    }

    async fn exchange(&self, conn: Connection, request: Request<Empty<Bytes>>) -> Attempt {
        let read_timeout = self.inner.read_timeout;
        let mut sender = conn.sender;
        let response = match tokio::time::timeout(read_timeout, sender.send_request(request)).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => return Attempt::Network(NetKind::Other),
            Err(_) => return Attempt::Network(NetKind::Timeout),
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            return Attempt::Status {
                status: status.as_u16(),
                retry_after,
            };
        }
        let max_body = self.inner.max_body;
        let announced = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if announced.is_some_and(|n| n > max_body) {
            return Attempt::Fatal(LawError::BodyTooLarge { limit: max_body });
        }
        let mut body = Vec::with_capacity(announced.unwrap_or(0).min(1 << 20) as usize);
        let mut incoming = response.into_body();
        loop {
            let frame = match tokio::time::timeout(read_timeout, incoming.frame()).await {
                Err(_) => return Attempt::Network(NetKind::Timeout),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Attempt::Network(NetKind::Other),
                Ok(Some(Ok(frame))) => frame,
            };
            if let Ok(chunk) = frame.into_data() {
                if (body.len() + chunk.len()) as u64 > max_body {
                    return Attempt::Fatal(LawError::BodyTooLarge { limit: max_body });
                }
                body.extend_from_slice(&chunk);
            }
        }
        self.keep(sender, Instant::now());
        if body.iter().all(u8::is_ascii_whitespace) {
            return Attempt::Fatal(LawError::EmptyBody);
        }
        Attempt::Body(body)
    }
}

async fn handshake<T>(io: T) -> Result<SendRequest<Empty<Bytes>>, NetKind>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io))
        .await
        .map_err(|_| NetKind::Connect)?;
    tokio::spawn(async move {
        // Ends when the server closes the connection or the last sender is dropped.
        let _ = connection.await;
    });
    Ok(sender)
}

/// A failed TLS handshake as a [`NetKind`]: a certificate rustls refused names its reason,
/// anything else (a reset, a protocol error) is a connection failure.
fn tls_failure(e: &std::io::Error) -> NetKind {
    use tokio_rustls::rustls::{CertificateError, Error};
    let Some(Error::InvalidCertificate(cert)) = e.get_ref().and_then(|inner| inner.downcast_ref::<Error>())
    else {
        return NetKind::Connect;
    };
    NetKind::Tls(match cert {
        CertificateError::UnknownIssuer => TlsProblem::UnknownIssuer,
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => TlsProblem::Expired,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            TlsProblem::WrongName
        }
        _ => TlsProblem::Invalid,
    })
}

/// The TLS client for `https`: the platform's roots (on Linux the system store, or the
/// file `SSL_CERT_FILE` names) and those of `ca_file`, HTTP/1.1 by ALPN, and the name
/// to verify.
fn tls_for(
    host: &Host<String>,
    ca_file: Option<&std::path::Path>,
) -> Result<(TlsConnector, ServerName<'static>), LawError> {
    let extra = match ca_file {
        None => Vec::new(),
        Some(path) => extra_roots(path)?,
    };
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
        .map_err(|e| LawError::InvalidRequest(format!("TLS roots could not be loaded: {e}")))?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| LawError::InvalidRequest(format!("TLS could not be set up: {e}")))?
        .dangerous()
        // The platform verifier: certificate chain, expiry and host name, as a browser does.
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = match host {
        Host::Domain(d) => ServerName::try_from(d.clone())
            .map_err(|_| LawError::InvalidRequest("base URL host is not a valid TLS name".into()))?,
        Host::Ipv4(ip) => ServerName::IpAddress((*ip).into()),
        Host::Ipv6(ip) => ServerName::IpAddress((*ip).into()),
    };
    Ok((TlsConnector::from(Arc::new(config)), name))
}

/// The certificates of a PEM file, or an error naming `LAW_API_CA_FILE` and what is wrong.
fn extra_roots(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, LawError> {
    let bad = |why: String| LawError::InvalidRequest(format!("LAW_API_CA_FILE ({}): {why}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let roots = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("is not PEM: {e}")))?;
    if roots.is_empty() {
        return Err(bad("holds no CERTIFICATE block".into()));
    }
    Ok(roots)
}
