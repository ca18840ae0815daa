//! `lawsync probe`: its flags, its client built from the configuration as the functions
//! build theirs (the key, Redis, the shared gate), and its output.
#![allow(clippy::print_stdout)] // a command line: stdout is its product

use std::sync::Arc;

use super::CallFailed;
use super::{Check, ProbeError, ProbeOptions};
use crate::cli::{ExitStatus, store_status};
use crate::config::{Config, ConfigError};
use crate::law::calendar::{kst_day, yyyymmdd};
use crate::law::{LawClient, LawError, UPSTREAM, check_date};
use crate::policy::PROBE_BUDGET;
use crate::redis_conn::RedisFailure;
use crate::secrets::SecretError;

/// `lawsync probe`'s flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProbeArgs {
    /// First decision date of the window whose pages are compared, YYYYMMDD (default: 1
    /// January of last year, a year of several pages).
    #[arg(long, requires = "to")]
    pub from: Option<String>,
    /// Last decision date of that window, YYYYMMDD (default: 31 December of last year).
    #[arg(long, requires = "from")]
    pub to: Option<String>,
}

impl ProbeArgs {
    /// The window: the flags checked, or last year in Korea.
    fn window(&self, today: &str) -> Result<(String, String), ProbeCliError> {
        let usage = |e: LawError| match e {
            LawError::InvalidRequest(why) => ProbeCliError::Usage(why),
            other => ProbeCliError::Usage(other.to_string()),
        };
        match (&self.from, &self.to) {
            (Some(from), Some(to)) => {
                check_date("--from", from).map_err(usage)?;
                check_date("--to", to).map_err(usage)?;
                if from > to {
                    return Err(ProbeCliError::Usage(format!("--from {from} is after --to {to}")));
                }
                Ok((from.clone(), to.clone()))
            }
            _ => {
                let last_year: u32 = today[..4].parse::<u32>().unwrap_or(2026).saturating_sub(1);
                Ok((format!("{last_year}0101"), format!("{last_year}1231")))
            }
        }
    }
}

/// Why `lawsync probe` failed. Safe to print: never the key.
#[derive(Debug, thiserror::Error)]
pub enum ProbeCliError {
    #[error("lawsync probe: {0}")]
    Usage(String),
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Redis(#[from] RedisFailure),
    #[error("Redis credentials: {0}")]
    RedisAuth(#[from] crate::redis_auth::AuthError),
    /// The client refused its configuration.
    #[error("law.go.kr client: {0}")]
    Client(LawError),
    #[error("lawsync probe: {0}")]
    NoAnswer(ProbeError),
    #[error("lawsync probe: {} from what the mirror assumes: {} (the report says how)",
        if .0.len() == 1 { "1 assumption differs".to_owned() } else { format!("{} assumptions differ", .0.len()) },
        .0.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "))]
    Differs(Vec<Check>),
    #[error("{0}")]
    Output(serde_json::Error),
}

impl ProbeCliError {
    /// What kind of failure this is, as the process's exit status.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            ProbeCliError::Usage(_) => ExitStatus::Usage,
            ProbeCliError::Config(_)
            | ProbeCliError::Secret(_)
            | ProbeCliError::RedisAuth(_)
            | ProbeCliError::Client(_) => ExitStatus::Config,
            ProbeCliError::Redis(e) => store_status(e),
            ProbeCliError::NoAnswer(ProbeError::NoAnswer(e)) => match e {
                CallFailed::Law(LawError::Gate(crate::gate::GateError::Unavailable(e))) => store_status(e),
                // The key, the IP it is registered for, its grants, the CA store: the
                // user's set-up.
                CallFailed::Law(LawError::KeyRefused(_)) => ExitStatus::Config,
                _ => ExitStatus::Failure,
            },
            ProbeCliError::Differs(_) => ExitStatus::Differs,
            ProbeCliError::Output(_) => ExitStatus::Failure,
        }
    }
}

/// Runs `lawsync probe`: prints the report, then fails with [`ProbeCliError::Differs`]
/// when an assumption differs.
pub async fn run(args: ProbeArgs, json: bool) -> Result<(), ProbeCliError> {
    let today = yyyymmdd(kst_day(crate::clock::now_millis()));
    // A usage error is one whatever the environment: said before anything is asked.
    let window = args.window(&today)?;
    let cfg = Config::from_env()?;
    let sdk = crate::aws::sdk_config(&cfg).await;
    let oc = crate::secrets::resolve_oc(&cfg.law.oc, &sdk).await?;
    let redis = match crate::redis_auth::connect(&cfg.redis, &sdk).await {
        Ok(redis) => redis,
        Err(crate::redis_auth::ConnectError::Auth(e)) => return Err(e.into()),
        Err(crate::redis_auth::ConnectError::Redis(e)) => return Err(e.into()),
    };
    let ns = crate::keys::Namespace::new(&cfg.app_env, UPSTREAM)?;
    let gate = Arc::new(crate::app::law_gate(redis, &oc, &ns, cfg.gate)?);
    let client = LawClient::new(&cfg.law, oc, gate).map_err(ProbeCliError::Client)?;
    let opts = ProbeOptions {
        window,
        today,
        max_attempts: cfg.law.max_attempts,
        budget: PROBE_BUDGET,
        format: cfg.law.format,
    };
    let report = super::run(client, &opts).await.map_err(ProbeCliError::NoAnswer)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(ProbeCliError::Output)?
        );
    } else {
        print!("{}", report.text());
    }
    match report.differing() {
        differ if differ.is_empty() => Ok(()),
        differ => Err(ProbeCliError::Differs(differ)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::GateError;

    #[test]
    fn each_failure_ends_with_its_documented_exit_status() {
        let no_answer = |e: LawError| ProbeCliError::NoAnswer(ProbeError::NoAnswer(CallFailed::Law(e)));
        let cases = [
            (ProbeCliError::Usage("--from".into()), ExitStatus::Usage),
            (
                ProbeCliError::Differs(vec![Check::PagingDepth]),
                ExitStatus::Differs,
            ),
            (
                no_answer(LawError::KeyRefused(crate::law::KeyProblem::VerifyFailed)),
                ExitStatus::Config,
            ),
            (
                no_answer(LawError::Gate(GateError::Unavailable(RedisFailure::Timeout))),
                ExitStatus::Unavailable,
            ),
            (no_answer(LawError::HtmlPage), ExitStatus::Failure),
            (
                ProbeCliError::Redis(RedisFailure::Timeout),
                ExitStatus::Unavailable,
            ),
        ];
        for (e, status) in cases {
            assert_eq!(e.exit_status(), status, "{e}");
        }
        assert_eq!(
            ProbeCliError::Differs(vec![Check::PagingDepth, Check::TotalStable]).to_string(),
            "lawsync probe: 2 assumptions differ from what the mirror assumes: paging_depth, total_stable (the report says how)"
        );
    }

    #[test]
    fn the_window_is_last_year_unless_both_dates_are_given_and_valid() {
        let args = |from: &str, to: &str| ProbeArgs {
            from: Some(from.into()),
            to: Some(to.into()),
        };
        assert_eq!(
            ProbeArgs::default().window("20261202").ok(),
            Some(("20250101".into(), "20251231".into()))
        );
        assert_eq!(
            args("20240301", "20240331").window("20261202").ok(),
            Some(("20240301".into(), "20240331".into()))
        );
        let refused = args("20240331", "20240301").window("20261202");
        assert!(
            matches!(refused, Err(ProbeCliError::Usage(m)) if m == "--from 20240331 is after --to 20240301")
        );
    }
}
