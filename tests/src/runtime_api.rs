//! A Lambda Runtime API on loopback, to run the functions' real `bootstrap` binaries as
//! Lambda runs them.
//!
//! It speaks the runtime interface of 2018-06-01 (`invocation/next` with the request-id,
//! deadline, function-ARN and trace-id headers; `invocation/{id}/response`,
//! `invocation/{id}/error`, `init/error`) and the part of the Extensions API of 2020-01-01
//! an internal extension uses (`extension/register`, `extension/event/next`), which is
//! what a runtime registers to be sent SIGTERM before its environment is shut down.
//!
//! A test queues invocations with [`RuntimeApi::invoke`], reads what the runtime answered
//! with [`RuntimeApi::outcome`], and shuts the environment down as Lambda does on scale-in
//! with [`RuntimeApi::shut_down`] and [`Bootstrap::terminate`]. Every request that does not
//! fit the interface is kept in [`RuntimeApi::unexpected`].

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::servers::LawsyncEnv;
use crate::upstream::read_head;

/// The ARN the invocations carry (`lambda-runtime-invoked-function-arn`).
pub const FUNCTION_ARN_PREFIX: &str = "arn:aws:lambda:ap-northeast-2:123456789012:function:";

/// One invocation, as `invocation/next` hands it to the runtime.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub request_id: String,
    /// `lambda-runtime-deadline-ms`: Unix epoch milliseconds.
    pub deadline_ms: u64,
    pub function_arn: String,
    /// `lambda-runtime-trace-id`, when X-Ray tracing is on.
    pub trace_id: Option<String>,
    pub payload: Value,
}

impl Invocation {
    /// An invocation of `function` with `payload`, due to end `budget` from now, with a
    /// fresh request id and an X-Ray trace id.
    pub fn new(function: &str, payload: Value, budget: Duration) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let n = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = now.subsec_nanos();
        Self {
            request_id: format!(
                "{:08x}-{:04x}-4{:03x}-8000-{:012x}",
                now.as_secs() as u32,
                n & 0xffff,
                nanos & 0xfff,
                n
            ),
            deadline_ms: (now + budget).as_millis() as u64,
            function_arn: format!("{FUNCTION_ARN_PREFIX}{function}"),
            trace_id: Some(format!(
                "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=1",
                now.as_secs() as u32,
                (u128::from(nanos) << 32) | u128::from(n),
                u64::from(nanos) ^ n
            )),
            payload,
        }
    }

    /// Without a trace id (tracing off).
    pub fn untraced(mut self) -> Self {
        self.trace_id = None;
        self
    }
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// What the runtime answered for one invocation, or reported at init.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `invocation/{id}/response`: the handler's result.
    Response(Value),
    /// `invocation/{id}/error` or `init/error`: the error type header and the body.
    Error { error_type: Option<String>, body: Value },
}

impl Outcome {
    /// The response, or a panic naming the error.
    pub fn response(&self) -> &Value {
        match self {
            Outcome::Response(v) => v,
            Outcome::Error { error_type, body } => {
                panic!("the function failed ({error_type:?}): {body}")
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Invocation>,
    /// Request ids handed to the runtime, in order.
    handed: Vec<String>,
    outcomes: HashMap<String, Outcome>,
    init_error: Option<Outcome>,
    /// `invocation/next` requests received (handed or still waiting).
    polls: usize,
    /// Names of the extensions registered, in order.
    extensions: Vec<String>,
    /// Set by [`RuntimeApi::shut_down`]: the reason extensions are sent.
    shutdown: Option<String>,
    /// Requests that do not fit the interface, as "METHOD path".
    unexpected: Vec<String>,
}

/// The running server. Dropping it stops accepting.
#[derive(Debug)]
pub struct RuntimeApi {
    /// `127.0.0.1:PORT`: the value of `AWS_LAMBDA_RUNTIME_API`.
    pub address: String,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind runtime api");
        let address = listener.local_addr().expect("addr").to_string();
        let state = Arc::new(Mutex::new(State::default()));
        let changed = Arc::new(Notify::new());
        let (st, ch) = (state.clone(), changed.clone());
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, st.clone(), ch.clone()));
            }
        });
        Self {
            address,
            state,
            changed,
            task,
        }
    }

    /// Queues `invocation`; the runtime's next `invocation/next` receives it.
    pub fn push(&self, invocation: Invocation) -> String {
        let id = invocation.request_id.clone();
        self.lock().queue.push_back(invocation);
        self.changed.notify_waiters();
        id
    }

    /// Queues an invocation of `function` with `payload` and `budget` left; returns its
    /// request id.
    pub fn invoke(&self, function: &str, payload: Value, budget: Duration) -> String {
        self.push(Invocation::new(function, payload, budget))
    }

    /// Waits up to `within` for the runtime's answer to `request_id`.
    pub async fn outcome(&self, request_id: &str, within: Duration) -> Option<Outcome> {
        self.wait_for(within, |st| st.outcomes.get(request_id).cloned())
            .await
    }

    /// Waits up to `within` for an `init/error`.
    pub async fn init_error(&self, within: Duration) -> Option<Outcome> {
        self.wait_for(within, |st| st.init_error.clone()).await
    }

    /// Waits up to `within` until the runtime has asked for its `n`th invocation: it is
    /// initialised and idle, every earlier invocation answered.
    pub async fn wait_polls(&self, n: usize, within: Duration) -> bool {
        self.wait_for(within, |st| (st.polls >= n).then_some(()))
            .await
            .is_some()
    }

    /// Sends registered extensions the SHUTDOWN event (reason `spindown`, as on scale-in).
    /// Lambda sends the runtime SIGTERM at the same time: [`Bootstrap::terminate`].
    pub fn shut_down(&self) {
        self.lock().shutdown = Some("spindown".into());
        self.changed.notify_waiters();
    }

    /// Names of the extensions registered so far.
    pub fn extensions(&self) -> Vec<String> {
        self.lock().extensions.clone()
    }

    /// Request ids handed to the runtime so far.
    pub fn handed(&self) -> Vec<String> {
        self.lock().handed.clone()
    }

    /// Requests that did not fit the interface.
    pub fn unexpected(&self) -> Vec<String> {
        self.lock().unexpected.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("runtime api lock")
    }

    async fn wait_for<T>(&self, within: Duration, mut check: impl FnMut(&State) -> Option<T>) -> Option<T> {
        let until = tokio::time::Instant::now() + within;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(v) = check(&self.lock()) {
                return Some(v);
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                return check(&self.lock());
            }
        }
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const RUNTIME: &str = "/2018-06-01/runtime/";
const EXTENSION: &str = "/2020-01-01/extension/";

async fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>, changed: Arc<Notify>) {
    let mut buf = Vec::new();
    while let Some(req) = read_head(&mut sock, &mut buf).await {
        let route = format!("{} {}", req.method, req.path);
        let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::String(req.body.clone()));
        let error_type = req
            .header("lambda-runtime-function-error-type")
            .map(str::to_owned);
        let reply = if route == format!("GET {RUNTIME}invocation/next") {
            let inv = next_invocation(&state, &changed).await;
            let mut headers = vec![
                ("Lambda-Runtime-Aws-Request-Id", inv.request_id.clone()),
                ("Lambda-Runtime-Deadline-Ms", inv.deadline_ms.to_string()),
                ("Lambda-Runtime-Invoked-Function-Arn", inv.function_arn.clone()),
            ];
            if let Some(t) = &inv.trace_id {
                headers.push(("Lambda-Runtime-Trace-Id", t.clone()));
            }
            (200, headers, inv.payload.to_string())
        } else if let Some(rest) = route
            .strip_prefix("POST ")
            .and_then(|p| p.strip_prefix(RUNTIME))
            .and_then(|p| p.strip_prefix("invocation/"))
        {
            let outcome = match rest.rsplit_once('/') {
                Some((id, "response")) => Some((id.to_owned(), Outcome::Response(body))),
                Some((id, "error")) => Some((id.to_owned(), Outcome::Error { error_type, body })),
                _ => None,
            };
            let mut st = state.lock().expect("runtime api lock");
            match outcome {
                Some((id, outcome)) if st.handed.contains(&id) && !st.outcomes.contains_key(&id) => {
                    st.outcomes.insert(id, outcome);
                    drop(st);
                    changed.notify_waiters();
                    accepted()
                }
                _ => {
                    st.unexpected.push(route.clone());
                    (400, vec![], json!({"errorType": "InvalidRequestID"}).to_string())
                }
            }
        } else if route == format!("POST {RUNTIME}init/error") {
            let mut st = state.lock().expect("runtime api lock");
            if st.init_error.is_some() || !st.handed.is_empty() {
                st.unexpected.push(route.clone());
                (
                    403,
                    vec![],
                    json!({"errorType": "InvalidStateTransition"}).to_string(),
                )
            } else {
                st.init_error = Some(Outcome::Error { error_type, body });
                drop(st);
                changed.notify_waiters();
                accepted()
            }
        } else if route == format!("POST {EXTENSION}register") {
            let name = req.header("lambda-extension-name").unwrap_or("").to_owned();
            let mut st = state.lock().expect("runtime api lock");
            st.extensions.push(name.clone());
            let id = format!("ext-{}-{}", st.extensions.len(), name.len());
            drop(st);
            changed.notify_waiters();
            let info =
                json!({"functionName": "lawsync", "functionVersion": "$LATEST", "handler": "bootstrap"});
            (200, vec![("Lambda-Extension-Identifier", id)], info.to_string())
        } else if route == format!("GET {EXTENSION}event/next") {
            let reason = shutdown_reason(&state, &changed).await;
            let deadline =
                SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + Duration::from_secs(2);
            let event = json!({
                "eventType": "SHUTDOWN",
                "shutdownReason": reason,
                "deadlineMs": deadline.as_millis() as u64,
            });
            (200, vec![], event.to_string())
        } else {
            state
                .lock()
                .expect("runtime api lock")
                .unexpected
                .push(route.clone());
            (404, vec![], json!({"errorType": "NotFound"}).to_string())
        };
        if write(&mut sock, reply).await.is_err() {
            return;
        }
    }
}

fn accepted() -> (u16, Vec<(&'static str, String)>, String) {
    (202, vec![], json!({"status": "OK"}).to_string())
}

async fn next_invocation(state: &Mutex<State>, changed: &Notify) -> Invocation {
    state.lock().expect("runtime api lock").polls += 1;
    changed.notify_waiters();
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let mut st = state.lock().expect("runtime api lock");
            if let Some(inv) = st.queue.pop_front() {
                st.handed.push(inv.request_id.clone());
                return inv;
            }
        }
        notified.await;
    }
}

async fn shutdown_reason(state: &Mutex<State>, changed: &Notify) -> String {
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(reason) = state.lock().expect("runtime api lock").shutdown.clone() {
            return reason;
        }
        notified.await;
    }
}

async fn write(
    sock: &mut TcpStream,
    (status, headers, body): (u16, Vec<(&str, String)>, String),
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    sock.flush().await
}

/// Where the function bootstraps are: `LAWSYNC_BOOTSTRAPS` when set, else
/// `target/lambda` of the workspace, where `scripts/lambda-build.sh` (cargo-lambda, release
/// profile) leaves `<function>/bootstrap.zip`.
pub fn bootstraps_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LAWSYNC_BOOTSTRAPS") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/lambda")
}

/// The `bootstrap` of `function` (`search`, `detail`, `drainer`) as it is deployed: taken
/// out of its zip into a folder of the test's own, with the zip's modes. Panics, naming
/// the command that builds it, when the zip is missing.
pub fn bootstrap(function: &str) -> PathBuf {
    let zip = bootstraps_dir().join(function).join("bootstrap.zip");
    assert!(
        zip.exists(),
        "{} not built: `make test` builds it (scripts/lambda-build.sh, cargo-lambda)",
        zip.display()
    );
    let dir = std::env::temp_dir().join(format!(
        "lawsync-bootstrap-{function}-{}-{}",
        std::process::id(),
        NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("bootstrap dir");
    // Python's zipfile: present wherever the project's venv is, unlike `unzip`.
    let out = std::process::Command::new("python3")
        .args(["-c", UNZIP])
        .arg(&zip)
        .arg(&dir)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "unzip {}: {}",
        zip.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("bootstrap")
}

/// Extracts a zip keeping each member's Unix mode (`zipfile` alone drops it).
const UNZIP: &str = "import sys, zipfile, os
z = zipfile.ZipFile(sys.argv[1])
for i in z.infolist():
    p = z.extract(i, sys.argv[2])
    mode = (i.external_attr >> 16) & 0o777
    if mode:
        os.chmod(p, mode)
";

/// The environment Lambda gives a function's runtime, beside the function's own variables.
pub fn lambda_vars(function: &str, api: &RuntimeApi) -> Vec<(String, String)> {
    [
        ("AWS_LAMBDA_RUNTIME_API", api.address.clone()),
        ("AWS_LAMBDA_FUNCTION_NAME", format!("lawsync-test-{function}")),
        ("AWS_LAMBDA_FUNCTION_VERSION", "7".to_owned()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".to_owned()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/lawsync-test-{function}"),
        ),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2026/12/03/[7]0123456789abcdef".to_owned(),
        ),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".to_owned()),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_owned()),
        ("LAMBDA_TASK_ROOT", "/var/task".to_owned()),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime".to_owned()),
        ("TZ", ":UTC".to_owned()),
        // Lambda hands a function its role's credentials: on the moto stand-in, the key
        // that makes its calls the role's (see `crate::stack`).
        (
            "AWS_ACCESS_KEY_ID",
            crate::stack::Role::function(function).access_key().to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A function's bootstrap running under a [`RuntimeApi`], its stdout and stderr (Lambda
/// sends both to CloudWatch) kept line by line. Killed when dropped.
#[derive(Debug)]
pub struct Bootstrap {
    child: tokio::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The tasks reading stdout and stderr; each ends when its pipe closes.
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Bootstrap {
    /// Starts `function`'s bootstrap with exactly `env` plus the runtime's variables.
    pub fn start(function: &str, env: &LawsyncEnv, api: &RuntimeApi) -> Self {
        Self::start_path(&bootstrap(function), function, env, api)
    }

    /// Starts the bootstrap at `path`.
    pub fn start_path(path: &Path, function: &str, env: &LawsyncEnv, api: &RuntimeApi) -> Self {
        let mut cmd = tokio::process::Command::new(path);
        cmd.env_clear()
            .envs(env.vars().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(lambda_vars(function, api))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start bootstrap");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let readers = [
            Box::new(out) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
            Box::new(err),
        ]
        .into_iter()
        .map(|stream| {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines.lock().expect("lines").push(line);
                }
            })
        })
        .collect();
        Self {
            child,
            lines,
            readers,
        }
    }

    /// Every line written so far, stdout and stderr interleaved as read.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits up to `within` for the lines read so far to satisfy `done`, and returns them
    /// (satisfied or not, for the caller's assertion to show). The process writes a line
    /// before it answers the Runtime API, but this side reads its pipes on their own tasks:
    /// an answer can arrive before the lines written ahead of it have been read.
    pub async fn lines_when(&self, within: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let until = tokio::time::Instant::now() + within;
        loop {
            let lines = self.lines();
            if done(&lines) || tokio::time::Instant::now() >= until {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The lines so far, joined.
    pub fn output(&self) -> String {
        self.lines().join("\n")
    }

    /// The JSON log lines so far (other lines skipped).
    pub fn json_lines(&self) -> Vec<Value> {
        self.lines()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect()
    }

    /// Waits up to `within` for the process to exit.
    pub async fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let status = tokio::time::timeout(within, self.child.wait()).await.ok()?.ok();
        // Read to the end of both pipes, so every line the process wrote is in `lines`.
        // (A child of its own holding a pipe open would keep it open: bounded.)
        for reader in &mut self.readers {
            let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
        }
        status
    }

    /// Sends SIGTERM, as Lambda does when it shuts an environment down.
    pub fn terminate(&self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
}
