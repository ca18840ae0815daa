//! A scripted law.go.kr stand-in: a real HTTP/1.1 server on loopback.
//!
//! Each request takes the next [`Reply`] from the script (or the fallback when the script
//! is empty) and is recorded as a [`Seen`]. Replies can be anything the real upstream
//! has been seen to send, and worse: error bodies on 200, HTML, no Content-Length,
//! bodies that never end, headers then silence.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a reply's body is sent.
#[derive(Debug, Clone)]
pub enum Body {
    /// With a Content-Length.
    Fixed(Vec<u8>),
    /// Chunked, without a Content-Length.
    Chunked(Vec<u8>),
    /// Chunked, `total` bytes of filler, generated as it is sent.
    Endless { total: u64 },
    /// A Content-Length header that lies (announces `announced`, sends `actual`).
    LyingLength { announced: u64, actual: Vec<u8> },
    /// Headers, then nothing until the client gives up.
    Stall,
    /// Chunked, the body in `parts` pieces, one every `every`: a reply that never pauses
    /// long enough for a read timeout and still takes `parts × every` in all.
    Trickle {
        body: Vec<u8>,
        parts: usize,
        every: Duration,
    },
    /// Nothing at all: the connection is reset (RST) once the request is read.
    Reset,
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// Pause before the status line is sent.
    pub delay: Duration,
    /// Close the connection after this reply (with `Connection: close`).
    pub close: bool,
}

impl Reply {
    /// A 200 JSON reply.
    pub fn json(body: impl Into<String>) -> Self {
        Self::status(200)
            .with_body(Body::Fixed(body.into().into_bytes()))
            .header("Content-Type", "application/json;charset=UTF-8")
    }

    /// A reply with `status` and an empty body.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Body::Fixed(Vec::new()),
            delay: Duration::ZERO,
            close: false,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn with_body(mut self, body: Body) -> Self {
        self.body = body;
        self
    }

    pub fn text(self, body: impl Into<String>) -> Self {
        self.with_body(Body::Fixed(body.into().into_bytes()))
    }

    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Says `Connection: close` and closes the connection once the reply is written.
    pub fn closing(mut self) -> Self {
        self.close = true;
        self.header("Connection", "close")
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    /// The request body (read by Content-Length), as text.
    pub body: String,
    /// The status this server answered.
    pub status: u16,
    /// When its head was read, on the monotonic clock and on the wall clock (the one the
    /// look-alike's log and the gate's grants, on Redis' clock, are compared on).
    pub at: Instant,
    pub at_wall: SystemTime,
    /// Which connection carried it: 1 for the first this server accepted, and so on.
    pub connection: usize,
}

impl Seen {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug)]
struct State {
    script: VecDeque<Reply>,
    fallback: Reply,
    seen: Vec<Seen>,
    /// The rate rule, when enforced: a call closer than this to the previous call gets 429.
    min_interval: Option<Duration>,
    last_call: Option<Instant>,
    /// Connections accepted so far.
    connections: usize,
    /// Close a connection that carries no request for this long (a keep-alive timeout).
    idle_close: Option<Duration>,
}

/// The running server. Dropping it stops accepting.
#[derive(Debug)]
pub struct Upstream {
    pub base_url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Upstream {
    /// Starts a server that answers `fallback` once `script` is used up.
    pub async fn start(script: Vec<Reply>, fallback: Reply) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind upstream");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            fallback,
            seen: Vec::new(),
            min_interval: None,
            last_call: None,
            connections: 0,
            idle_close: None,
        }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let connection = {
                    let mut st = st.lock().expect("upstream lock");
                    st.connections += 1;
                    st.connections
                };
                tokio::spawn(serve(sock, connection, st.clone()));
            }
        });
        Self {
            base_url: format!("http://{addr}"),
            state,
            task,
        }
    }

    /// Enforces law.go.kr's rate rule: any call arriving closer than `interval` to the
    /// previous call is answered 429 with `Retry-After: 1` (and takes no scripted reply).
    pub fn enforce_interval(&self, interval: Duration) {
        self.state.lock().expect("upstream lock").min_interval = Some(interval);
    }

    /// Closes a connection that has carried no request for `idle`, without a word, as a
    /// server's keep-alive timeout does.
    pub fn close_idle_after(&self, idle: Duration) {
        self.state.lock().expect("upstream lock").idle_close = Some(idle);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.lock().expect("upstream lock").connections
    }

    /// Requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().expect("upstream lock").seen.clone()
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().expect("upstream lock").script.extend(replies);
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut sock: TcpStream, connection: usize, state: Arc<Mutex<State>>) {
    let mut buf = Vec::new();
    loop {
        let idle_close = state.lock().expect("upstream lock").idle_close;
        let head = match idle_close {
            None => read_head(&mut sock, &mut buf).await,
            Some(idle) => tokio::time::timeout(idle, read_head(&mut sock, &mut buf))
                .await
                .ok()
                .flatten(),
        };
        let Some(head) = head else {
            return;
        };
        let reply = {
            let mut st = state.lock().expect("upstream lock");
            let too_close = match (st.min_interval, st.last_call) {
                (Some(min), Some(last)) => head.at.duration_since(last) < min,
                _ => false,
            };
            st.last_call = Some(head.at);
            let reply = if too_close {
                Reply::status(429).header("Retry-After", "1")
            } else {
                st.script.pop_front().unwrap_or_else(|| st.fallback.clone())
            };
            st.seen.push(Seen {
                status: reply.status,
                connection,
                ..head
            });
            reply
        };
        let close = reply.close;
        if write_reply(&mut sock, reply).await.is_err() || close {
            return;
        }
    }
}

pub(crate) async fn read_head(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Seen> {
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        fill(sock, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 4);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let target = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < length {
        fill(sock, buf).await?;
    }
    let body = String::from_utf8_lossy(&buf[..length]).into_owned();
    buf.drain(..length);
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    Some(Seen {
        method,
        path: path.to_owned(),
        query,
        headers,
        body,
        status: 0,
        at: Instant::now(),
        at_wall: SystemTime::now(),
        connection: 0,
    })
}

/// Reads what the socket has into `buf`; `None` at end of stream.
async fn fill(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    let n = sock.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

pub(crate) async fn write_reply(sock: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    tokio::time::sleep(reply.delay).await;
    if matches!(reply.body, Body::Reset) {
        // Closing with a zero linger sends RST, not FIN. (Deprecated because a non-zero
        // linger blocks the thread on drop; a zero one never waits.)
        #[allow(deprecated)]
        sock.set_linger(Some(Duration::ZERO))?;
        return Err(std::io::Error::other("reset"));
    }
    let mut head = format!("HTTP/1.1 {} X\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match &reply.body {
        Body::Fixed(b) => head.push_str(&format!("Content-Length: {}\r\n", b.len())),
        Body::LyingLength { announced, .. } => head.push_str(&format!("Content-Length: {announced}\r\n")),
        Body::Chunked(_) | Body::Endless { .. } | Body::Trickle { .. } => {
            head.push_str("Transfer-Encoding: chunked\r\n")
        }
        Body::Stall => head.push_str("Content-Length: 100\r\n"),
        Body::Reset => {}
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await?;
    match reply.body {
        Body::Fixed(b) => sock.write_all(&b).await?,
        Body::LyingLength { actual, .. } => {
            sock.write_all(&actual).await?;
            sock.shutdown().await?;
            return Err(std::io::Error::other("closed after a short body"));
        }
        Body::Chunked(b) => {
            for part in b.chunks(1000) {
                sock.write_all(format!("{:x}\r\n", part.len()).as_bytes()).await?;
                sock.write_all(part).await?;
                sock.write_all(b"\r\n").await?;
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        Body::Endless { total } => {
            let block = vec![b'x'; 64 * 1024];
            let mut sent = 0u64;
            while sent < total {
                let n = block.len().min((total - sent) as usize);
                sock.write_all(format!("{n:x}\r\n").as_bytes()).await?;
                sock.write_all(&block[..n]).await?;
                sock.write_all(b"\r\n").await?;
                sent += n as u64;
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        Body::Trickle { body, parts, every } => {
            let size = body.len().div_ceil(parts.max(1)).max(1);
            for part in body.chunks(size) {
                tokio::time::sleep(every).await;
                sock.write_all(format!("{:x}\r\n", part.len()).as_bytes()).await?;
                sock.write_all(part).await?;
                sock.write_all(b"\r\n").await?;
                sock.flush().await?;
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        Body::Stall => {
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        Body::Reset => {}
    }
    sock.flush().await
}
