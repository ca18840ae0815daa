//! Every policy number of lawsync, named once, with the reason beside it.
//!
//! Configuration defaults (see [`crate::config`]) and fixed limits live here so that a
//! reviewer can audit the whole behaviour envelope on one screen.

use std::time::Duration;

/// law.go.kr documents no limit; about one call per second per key is what keeps a key
/// from being suspended. The interval is a floor on Redis' clock (no two granted starts
/// closer), but law.go.kr sees arrivals: the path from Lambda through a NAT gateway to
/// law.go.kr adds a few ms of jitter, and a start may leave up to [`grant_validity`] after
/// its grant. 50 ms over the 1 s rule covers both with room to spare, for about 5 % of the
/// key's day (82,000 calls instead of 86,400).
pub const DEFAULT_REQUEST_INTERVAL: Duration = Duration::from_millis(1050);
/// How late a holder may confirm its slot without costing anyone, by default: a hundredth
/// of the interval, within 2..=10 ms (10 ms at law.go.kr's interval, 2 ms at 20 ms).
/// Reservations are paced at interval + tolerance, so this is also the throughput given up
/// (1 % at 1 s); what it buys is that ordinary timer and scheduling noise (1-3 ms on a
/// busy 2-core machine) never moves the next holder back. A caller later than that still
/// starts in its slot and holds the next one back by the excess, one more round trip.
pub fn default_gate_tolerance(interval: Duration) -> Duration {
    (interval / 100)
        .clamp(Duration::from_millis(2), Duration::from_millis(10))
        .min(interval / MAX_TOLERANCE_SHARE)
}
/// Largest tolerance accepted: wake-up noise, not a second interval. Beyond 100 ms, or a
/// quarter of the interval (which the pace, interval + tolerance, gives up in throughput),
/// it is a misconfiguration: a late CPU is a few ms late, not a tenth of a second.
pub const MAX_GATE_TOLERANCE: Duration = Duration::from_millis(100);
pub const MAX_TOLERANCE_SHARE: u32 = 4;
/// How long a grant may wait to be sent: past it the caller gives the start back and asks
/// again rather than arrive late at law.go.kr beside an on-time call. A twentieth of the
/// interval within 2..=5 ms: 5 ms at law.go.kr's interval, inside its 50 ms margin over
/// the rule with 45 ms to spare; 2 ms at a fast 25 ms interval against a 20 ms rule. Below
/// 2 ms, the scheduling noise of a busy machine would give back most grants.
/// Never more than the interval itself. `LAW_API_GRANT_VALIDITY_MS` overrides it, for an upstream with a wider margin (or none).
pub fn grant_validity(interval: Duration) -> Duration {
    (interval / 20)
        .clamp(Duration::from_millis(2), Duration::from_millis(5))
        .min(interval)
}
/// Stale grants given back in a row before a call gives up (the upstream not called, the
/// work parked): a process that cannot send within the validity four times running is
/// starved, and its next grant would be late too.
pub const MAX_STALE_GRANTS: u32 = 4;
/// How long an idle gate state is kept after its last slot or cooldown. A missing state
/// opens with one interval of quiet (it may have been deleted or lost in a failover right
/// after a call), so a gate that vanished after every idle second would make each
/// first call after a pause wait an interval; an hour of a few dozen bytes avoids that.
pub const GATE_STATE_IDLE_TTL: Duration = Duration::from_secs(60 * 60);
/// Ceilings that keep the gate's arithmetic (µs in Lua doubles, i64 in Rust) far from
/// overflow, and catch a unit mistake (seconds typed as milliseconds) at start-up.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60 * 60);
pub const MAX_BURST: u32 = 10_000;
pub const MAX_WAIT_CEILING: Duration = Duration::from_secs(15 * 60);
/// Calls allowed back to back before spacing applies. 1 = strict spacing, as law.go.kr
/// wants; a 4 req/s API with a short allowance would use interval 250 ms and burst 4.
pub const DEFAULT_BURST: u32 = 1;
/// Attempts per call, the first included (the seed's default): enough to ride out a
/// single 5xx or network blip, few enough that a dead upstream is parked quickly.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Longest a caller will wait for a gate slot or a backoff in-process. Anything longer
/// goes to the retry queue instead of holding an invocation (and its bill) open.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);
/// Longest an SQS handler (search, detail) waits for a gate slot, by default: one interval
/// plus the tolerance, so it sleeps only for the slot right after the call in flight. With
/// N environments on one queue, the seed's design keeps N − 1 of them asleep on the gate,
/// each billed for it; here a message whose slot is further away is parked in the retry
/// queue at once (one Redis call) and the single drainer, pacing itself, works it off.
pub fn default_handler_max_wait(interval: Duration, tolerance: Duration) -> Duration {
    interval + tolerance
}
/// Largest reply read; a precedent with full text is well under 1 MiB, so 16 MiB only
/// stops runaway or hostile bodies before they exhaust a 128 MiB Lambda.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
/// TCP+TLS set-up bound; a healthy law.go.kr answers the handshake in well under 1 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound between two reads of the reply; full-text pages can be slow to render upstream.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection to law.go.kr may sit idle and still be used for the next call.
/// Connections are opened before the gate grants a slot, so the time from grant to
/// arrival is one write and half a round trip, never a TCP and TLS handshake (over a NAT
/// gateway to Korea, tens to hundreds of ms: more than the 50 ms margin of
/// [`DEFAULT_REQUEST_INTERVAL`]). A pooled connection the server has meanwhile closed
/// would fail after its grant was spent, so idle ones are reused only within 4 s, under the
/// 5 s keep-alive that web servers commonly default to; an older one is replaced before
/// the grant.
pub const HTTP_IDLE_REUSE: Duration = Duration::from_secs(4);
/// Idle connections kept per process: a caller reuses one per call in flight, and the
/// widest caller, a drainer pass, has at most [`MAX_DRAIN_JOBS_IN_FLIGHT`] (16) of those;
/// twice that leaves room for a handler beside it in the same process.
pub const HTTP_MAX_IDLE: usize = 32;
/// Since 2026 law.go.kr refuses requests without this Referer.
pub const DEFAULT_REFERER: &str = "https://www.law.go.kr/";
/// Some non-browser User-Agents are refused, so a browser-like one is the default.
pub const DEFAULT_USER_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 lawsync/0.1";

/// A Retry-After above this is treated as absurd and capped: no upstream plausibly means
/// "come back next year", and an unbounded cooldown would stall the cluster.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(24 * 60 * 60);
/// Base of the exponential backoff: attempt n (0-based) waits at least 2^n × this.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Upward jitter added to a backoff, as a fraction of it, so that instances that failed
/// together do not retry together. Never downward: a Retry-After is a floor.
pub const BACKOFF_JITTER_FRACTION: f64 = 0.2;
/// Time kept free before an invocation's deadline: enough to report a batch result and
/// park unfinished work after the last call returns.
pub const DEADLINE_SAFETY_MARGIN: Duration = Duration::from_millis(500);
/// Shortest window in which an upstream call is still started; a call needs a connect
/// and a first read, and one that would be cut off mid-way wastes a rate slot.
pub const MIN_CALL_WINDOW: Duration = Duration::from_secs(2);

/// Redis connection set-up bound. ElastiCache answers in a few ms inside the VPC; a dead
/// Redis must fail the call in well under a second, never hang the invocation.
pub const DEFAULT_REDIS_CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
/// Bound on one Redis reply; every script answers in about a millisecond, so a hung
/// Redis is reported in a quarter of a second instead of holding the invocation.
pub const DEFAULT_REDIS_RESPONSE_TIMEOUT: Duration = Duration::from_millis(250);
/// Reconnect attempts after the first: one, so a dropped idle connection heals silently
/// but a dead Redis is reported after about two connect timeouts.
pub const REDIS_CONNECT_RETRIES: usize = 1;
/// How long an ElastiCache IAM token is valid: ElastiCache's own maximum, 15 minutes.
/// A token is only checked when a connection authenticates.
pub const IAM_TOKEN_LIFETIME: Duration = Duration::from_secs(900);
/// How often every live connection is sent a fresh IAM token: well inside a token's 15
/// minutes (so a token in hand is never stale) and far inside the 12 hours after which
/// ElastiCache closes a connection that was never re-authenticated. One `AUTH` per
/// connection per ten minutes.
pub const IAM_TOKEN_RENEW: Duration = Duration::from_secs(600);
/// How long before AWS credentials expire they are fetched anew for IAM tokens: Lambda's
/// role credentials are renewed well before this, and a token signed with credentials
/// about to expire would stop working with them.
pub const IAM_CREDENTIALS_REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// Longest wait for the credentials provider: a hung credentials endpoint must not hold
/// every connection's token (they share one cache) for longer than a connect may take
/// twice.
pub const IAM_CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(2);
/// After a failed or hung refresh, cached credentials stay in use while they are good for
/// this much more: a token made with them can still be checked at connect.
pub const IAM_CREDENTIALS_MIN_LEFT: Duration = Duration::from_secs(30);
/// No new fetch within this time of a failed one: in an outage every node's reconnect asks
/// for a token, and the credentials endpoint (IMDS, STS) throttles a caller that hammers it.
pub const IAM_CREDENTIALS_RETRY_AFTER: Duration = Duration::from_secs(1);
/// Tries at making one IAM token (fetching credentials) before a connection is told it
/// failed: a credentials endpoint that blinks once does not fail a connect.
pub const IAM_TOKEN_ATTEMPTS: u32 = 3;
/// Pause between those tries: short, as a connect waits on them.
pub const IAM_TOKEN_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// How long a failed connect may spend telling a TLS mismatch (TLS to a plain port, or the
/// reverse) from a dead server: one small exchange with the server, bounded like a connect.
pub const REDIS_TLS_PROBE_TIMEOUT: Duration = Duration::from_millis(250);

/// Failures before a retry-queue entry becomes a dead letter (the seed's 30).
pub const DEFAULT_RETRY_MAX_ATTEMPTS: u32 = 30;
/// Fixed delay between the end of one drainer pass and the start of the next (the seed's 10 s).
pub const DEFAULT_DRAIN_INTERVAL: Duration = Duration::from_secs(10);
/// law.go.kr's page size ceiling for lawSearch.do.
pub const MAX_DISPLAY: u32 = 100;

/// First retry of a parked job: one drain interval, so a blip is retried on the next pass.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_secs(10);
/// Longest gap between two retries of one job. With the base doubling per failure, 30
/// failures span about 21 hours: long enough to outlast a day-long upstream outage
/// before anything is dead-lettered.
pub const RETRY_BACKOFF_CAP: Duration = Duration::from_secs(60 * 60);
/// When a drainer job refused by the rate gate without a time (an unsettled or unreachable
/// gate) falls due again: one drain interval, the next pass. A refusal is not an attempt,
/// so this delay is all it costs the entry.
pub const GATE_REFUSED_RETRY: Duration = Duration::from_secs(10);
/// Longest job identity kept readable in its queue member name (`KIND:identity`): a
/// precedent id or a search window with a short query, whole. A longer one (a search with
/// a query of up to 200 characters, 800 bytes) is named by its first
/// [`IDENTITY_PREFIX_BYTES`] and its SHA-256, so a member name stays under about 140 bytes
/// whatever the message held, and stays one name per job. Hashed names are always longer
/// than this, so they never equal a readable one.
pub const READABLE_IDENTITY_BYTES: usize = 96;
/// Bytes of a long identity kept, cut at a character boundary, before its digest.
pub const IDENTITY_PREFIX_BYTES: usize = 32;
/// Longest job identity accepted at all: it is stored in the job and shown by `lawsync
/// queue list`. Five times the longest a message can give (dates, 800 bytes of query, page
/// and display), so whatever the handlers accept, the queue accepts.
pub const MAX_JOB_IDENTITY_BYTES: usize = 4096;
/// Longest identity the previous release named as `KIND:identity` in full. Entries it
/// parked with identities longer than [`READABLE_IDENTITY_BYTES`] keep that name and are
/// found under it.
pub const LEGACY_MAX_IDENTITY_BYTES: usize = 256;
/// Sanitized errors kept per retry entry (newest last), so a dead letter shows its story.
pub const ERROR_HISTORY_LEN: usize = 10;
/// Entries kept in the run-history stream (approximate trim): days of failures at the
/// rate one key allows, a few MB of Redis.
pub const HISTORY_STREAM_MAXLEN: usize = 10_000;
/// Most entries one claim moves between sets (expired leases, newly due); bounds the
/// script's run time however large the backlog (a millisecond or two), since Redis runs
/// scripts one at a time and the gate waits behind them. Four times the largest batch, so
/// promotion outpaces consumption; while a huge due backlog is being promoted, the
/// oldest-first order holds among the promoted entries.
pub const CLAIM_MOVE_LIMIT: usize = 200;
/// Most entries leased in one claim: a 60 s drainer at one call per second cannot work more.
pub const MAX_CLAIM_BATCH: usize = 50;
/// How slow a law.go.kr reply may be, in gate paces, before a drainer's pipeline can no
/// longer keep the key busy: long judgments render slowly, up to about 1.5 intervals.
pub const DRAIN_SLOW_REPLY_PACES: f64 = 1.5;
/// Time a drainer job spends after its reply: storing the document (an S3 PUT, tens of ms,
/// a few hundred at its slowest) and settling its entry (one Redis round trip).
pub const DRAIN_JOB_AFTER_REPLY: Duration = Duration::from_millis(300);
/// Most jobs one drainer pass works at once: it bounds what one drainer holds open (HTTP
/// connections, a reply in memory each) at fast paces, where [`drain_jobs_in_flight`]
/// would run to hundreds; 16 still cover 32 ms of store and settle at a 2 ms pace.
pub const MAX_DRAIN_JOBS_IN_FLIGHT: usize = 16;
/// Jobs a drainer pass works at once, launched one gate `pace` apart. A job holds its place
/// for its gate wait (up to a pace), its reply (up to [`DRAIN_SLOW_REPLY_PACES`]) and its
/// store and settle ([`DRAIN_JOB_AFTER_REPLY`]); with that many in flight, the next call
/// is always waiting at the gate when a slot opens, so a slow reply never idles the key.
/// Three at law.go.kr's pace (1,060 ms). The gate still spaces every start.
pub fn drain_jobs_in_flight(pace: Duration) -> usize {
    let pace = pace.max(Duration::from_millis(1));
    let held = pace + pace.mul_f64(DRAIN_SLOW_REPLY_PACES) + DRAIN_JOB_AFTER_REPLY;
    (held.as_micros().div_ceil(pace.as_micros()) as usize).clamp(1, MAX_DRAIN_JOBS_IN_FLIGHT)
}
/// Most dead letters one redrive script takes; `redrive` loops, so one call never blocks
/// Redis for long however many there are.
pub const REDRIVE_BATCH: usize = 500;
/// Longest error text kept with an entry or sent in an alert; longer ones are cut.
pub const MAX_ERROR_TEXT: usize = 500;
/// Pending dead-letter alerts sent per pass.
pub const ALERTS_PER_PASS: usize = 50;
/// Lease kept beyond the holder's own deadline, so a slow ack is not mistaken for a death.
pub const LEASE_MARGIN: Duration = Duration::from_secs(30);
/// Lease when the holder has no deadline (the CLI).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5 * 60);
/// Bound on one alert delivery: an alert is not worth holding a drainer pass.
pub const ALERT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `lawsync local`, told to stop, lets a drainer run finish the jobs in flight
/// (three at the default pace, launched a pace apart: the last starts within about two
/// paces, 2.1 s, and a reply takes well under a second) before dropping them; past it, the
/// leases and the lock expire on their own, as after a crash.
pub const LOCAL_STOP_GRACE: Duration = Duration::from_secs(5);
/// How long a function, sent SIGTERM by Lambda, waits for its runs to hand back the lock
/// and their unstarted work before it exits: Lambda gives a runtime with an internal
/// extension 500 ms before SIGKILL; 100 ms of it are left for the last log lines.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(400);
/// Of [`SHUTDOWN_GRACE`], how long a drainer's jobs in flight may take to finish before they
/// are cut off and their entries handed back; the rest is for the releases (a Redis round
/// trip each, under the 250 ms response timeout) and the lock.
pub const SHUTDOWN_JOB_GRACE: Duration = Duration::from_millis(150);

// ---------------------------------------------------------------- the key's health

/// How long the whole cluster holds off after law.go.kr refuses the key itself (see
/// [`crate::key_health`]) before one call probes it again. Registering an egress IP or
/// applying for an API takes an operator minutes; twelve probes an hour cost nothing of the
/// key's day, where retrying every job once a second would spend it all on refusals.
pub const KEY_PROBE_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// How long an open circuit is kept after its last refusal when nothing probes it (no work
/// was due): an hour, after which the next call probes as if it were closed.
pub const KEY_HEALTH_KEEP: Duration = Duration::from_secs(60 * 60);
/// Beyond the connect and read timeouts, how long a probe of an open circuit is waited for
/// (see [`key_probe_window`]): a refusal page is a few KB, read in one or two frames once
/// its headers are in.
pub const KEY_PROBE_MARGIN: Duration = Duration::from_secs(2);
/// How long, at most, a probe of an open circuit takes to be answered, and so how long the
/// gate lets no other call that could close the circuit start beside it: the probe's
/// connection (when the pooled one is gone), its reply's headers, and [`KEY_PROBE_MARGIN`]
/// for its body (15 s at the defaults). The probe's call is cut at it, so two are never out
/// at once. Its answer lets the next callers through (one already told to wait for the
/// window sleeps it out); a probe cut by it counts as none, and the next call probes.
pub fn key_probe_window(connect_timeout: Duration, read_timeout: Duration) -> Duration {
    connect_timeout + read_timeout + KEY_PROBE_MARGIN
}
/// How long a key-health alert taken for delivery is kept from the next drainer pass: a
/// delivery is bounded by [`ALERT_TIMEOUT`]; past this, an alert whose delivery was never
/// confirmed (the drainer died, or Redis' reply was lost) is offered again, so it is sent
/// twice rather than never.
pub const KEY_ALERT_LEASE: Duration = Duration::from_secs(60);
/// How long the whole cluster holds off after an HTML page of no known shape on a 200: a
/// throttle, block or maintenance page nobody has recorded yet. As long as a 429 without
/// Retry-After would at its worst: the key is not hammered while the page lasts, and a
/// passing glitch costs a minute.
pub const UNKNOWN_PAGE_COOLDOWN: Duration = Duration::from_secs(60);
/// Replies of no known shape kept for `lawsync probe`: the latest few show whether one
/// page repeats.
pub const UNKNOWN_REPLIES_KEPT: usize = 10;
/// Bytes of each such reply kept: an error page says what it is in its first kilobyte.
pub const UNKNOWN_REPLY_BYTES: usize = 2048;
/// How long the format a key was found served in (and the replies of no known shape) are
/// kept without being seen again: a month, so cold starts after a quiet week still ask in
/// the right format at once.
pub const LEARNED_FORMAT_KEEP: Duration = Duration::from_secs(30 * 86_400);

// ---------------------------------------------------------------- the mirror

/// How long a `missing/` marker is trusted before its id, listed again, is fetched again.
/// law.go.kr's "no such precedent" for a listed id is mostly the 국세청 source, whose
/// details arrive in batches weeks to months later; a month re-asks about a dozen times a
/// year per such id, a few hundred calls a year for the whole corpus.
pub const MISSING_RECHECK: Duration = Duration::from_secs(30 * 86_400);
/// Store reads in flight for one page's ids the held cache does not know: a page is 100
/// ids, and S3 answers a GET in tens of ms, so a page after a Redis flush takes a few
/// hundred ms of store reads, none of them a law.go.kr call.
pub const HELD_STORE_LOOKUPS_IN_FLIGHT: usize = 16;
/// How long Redis keeps a sync run's counts after its last record (and before, from its
/// start): long enough for `lawsync sync status` to show last month's runs and for a
/// backfill of the whole corpus (more than a day of the key's calls) to finish; the
/// record in the store is kept for good.
pub const RUN_KEYS_TTL: Duration = Duration::from_secs(90 * 86_400);
/// The per-run lock while its record is written: a record and a feed file are two store
/// writes of a few KB, well under a second; a writer that dies frees it after this.
pub const RUN_FINALIZE_LOCK: Duration = Duration::from_secs(60);
/// Months of decision dates the daily run reads in full: this month and the one before.
/// Most precedents appear within a month of their decision, and revisions (a corrected
/// case name, a changed judgment type) come soon after; reading them whole costs a few
/// dozen search calls a day and sees both.
pub const DAILY_RECENT_MONTHS: u32 = 2;
/// Older months the daily run probes with one `display=1` call each, reading one in full
/// only when law.go.kr lists more than the mirror holds for it: three years in all, which
/// covers the tail of late publications (weeks to months, the 국세 / 근로복지공단 batches)
/// for 34 calls a day, 0.04 % of the key's 86,400. Later publications, undated precedents
/// and revisions of older ones are caught by the whole-list probe and the weekly sweep.
pub const DAILY_PROBE_MONTHS: u32 = 34;
/// Work a backfill lets wait before it releases another window: detail messages its
/// windows have sent and not settled, pages not read yet, and everything parked in the
/// retry queue. About an hour of the key's calls at 1 call/s: enough that several windows
/// are in flight and the key never waits on a window's first page, few enough that SQS
/// and Redis hold thousands of entries, never the corpus's 100,000.
pub const BACKFILL_WATERMARK: u64 = 4_000;
/// Hits above which a backfill window is split in two (by decision date) instead of paged:
/// 20 pages. Month windows of the corpus list a few hundred; a larger one is halved until
/// it fits, so that no window outweighs the watermark and paging never goes deep.
pub const BACKFILL_SPLIT_HITS: u64 = 2_000;
/// How long backfill work found waiting beside a daily (or any other) run goes back to
/// its queue: daily work goes first, and the daily run takes a minute or two of calls, so
/// the backfill waits about that long, then finds the key free again.
pub const BACKFILL_YIELD: Duration = Duration::from_secs(15);
/// How long an open run that is not a backfill holds the backfill back at most: a run that
/// never completes (its Redis keys lost mid-way) must not stop the backfill for good; a
/// daily run finishes in minutes, a weekly sweep in well under this.
pub const FOREGROUND_HOLD: Duration = Duration::from_secs(6 * 3_600);
/// How long Redis keeps a backfill window's run counts after its record is written: its
/// record in the store says everything after, and 100,000 ids counted for 90 days would
/// make Redis a second copy of the corpus. A day covers late duplicate deliveries.
pub const BACKFILL_WINDOW_KEEP: Duration = Duration::from_secs(86_400);
/// Store reads in flight when a backfill is planned on a Redis that has forgotten it: each
/// window's record is looked for, so completed windows are not searched again.
pub const BACKFILL_RECORD_LOOKUPS_IN_FLIGHT: usize = 16;

// ---------------------------------------------------------------- `lawsync probe`

/// Most requests `lawsync probe` sends to law.go.kr, retries included: its checks take
/// about 15 calls on a 100,000-hit list (a dozen of them the binary search for a paging
/// limit), so 40 leaves room for retries while costing under two minutes and 0.05 % of the
/// key's day. A call is started only while its attempts (`LAW_API_MAX_ATTEMPTS`) fit in
/// what is left.
pub const PROBE_BUDGET: u32 = 40;
/// Pages of one date window read to compare their `totalCnt` and their ids: three pages are
/// two comparisons, enough to see a count that moves with the page or a hit listed twice.
pub const PROBE_WINDOW_PAGES: u32 = 3;
/// Most steps of the binary search for the deepest page law.go.kr answers: 12 halvings
/// pin it to one page in 4,096 (409,600 hits at 100 a page, four times the corpus).
pub const PROBE_DEPTH_STEPS: u32 = 12;
/// 국세 hits whose detail the probe asks for: about a third of them have none on the real
/// service, so three show both answers (detail and "일치하는 판례가 없습니다") more often
/// than not, for three calls.
pub const PROBE_NTS_DETAILS: usize = 3;
/// How long a backfill window marked released may have no run in Redis before a pump takes
/// its release for lost (its releaser died before opening the run) and sends its first page
/// itself. A release is a Redis write, a run opened and one SQS send, well under a second;
/// a minute covers a slow send, and a pump meeting a release in progress does not send
/// the window a second time (every page of it would be read twice).
pub const BACKFILL_RELEASE_GRACE: Duration = Duration::from_secs(60);
/// The earliest decision date a backfill accepts. law.go.kr's precedents begin after 1945
/// (the courts of the Republic); a range before it is a typo (`00010101`) that would plan
/// one window, one Redis field and one search call per month of it.
pub const BACKFILL_EARLIEST: &str = "19450101";
