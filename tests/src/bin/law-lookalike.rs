//! The law.go.kr look-alike as a program, for the demo and for trying a client by hand.
//!
//! ```text
//! law-lookalike --oc KEY [--port 0] [--interval-ms 1000] [--seed 1] [--today YYYYMMDD] [--decided YYYYMMDD~YYYYMMDD] [--log FILE] [--inject JSON]...
//!               [--page-limit D [--page-limit-error]] [--unstable-total]
//! ```
//! `--today` hides what the corpus publishes after that day (and revisions after it), until
//! `POST /_control/today` moves it. `--page-limit D` answers search pages after page D
//! without hits (with HTTP 400 given `--page-limit-error`), and `--unstable-total` makes
//! `totalCnt` grow with the page: assumptions of the mirror broken, for `lawsync probe`
//! (`POST /_control/quirks` changes them at run time). `--decided FROM~TO` keeps only the
//! precedents decided in those days, and no undated ones: a small world.
//! Prints `listening <base URL>` on stdout once it accepts, then a line per call on stderr.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use lawsync_tests::lookalike::{Beyond, Injection, Lookalike, LookalikeConfig, PageLimit, check_today};

const USAGE: &str = "usage: law-lookalike --oc KEY [--port N] [--interval-ms MS (0 = no rule)] [--seed N] [--today YYYYMMDD] [--decided YYYYMMDD~YYYYMMDD] [--log FILE] [--inject JSON]... [--page-limit D [--page-limit-error]] [--unstable-total] [--quiet]";

fn parse() -> Result<(u16, LookalikeConfig, Vec<Injection>), String> {
    let mut args = std::env::args().skip(1);
    let mut cfg = LookalikeConfig::new("");
    cfg.echo = true;
    let mut port = 0u16;
    let mut inject = Vec::new();
    let mut limit_error = false;
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--quiet" => cfg.echo = false,
            "--unstable-total" => cfg.quirks.unstable_total = true,
            "--page-limit-error" => limit_error = true,
            _ => {}
        }
        if matches!(
            flag.as_str(),
            "--quiet" | "--unstable-total" | "--page-limit-error"
        ) {
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value\n{USAGE}"))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v:?}"))
        };
        match flag.as_str() {
            "--oc" => cfg.oc = value,
            "--port" => {
                port = u16::try_from(number(&value)?).map_err(|_| format!("--port: out of range: {value}"))?
            }
            "--interval-ms" => {
                cfg.interval = Some(number(&value)?)
                    .filter(|&ms| ms > 0)
                    .map(Duration::from_millis)
            }
            "--seed" => cfg.seed = number(&value)?,
            "--today" => {
                check_today(&value).map_err(|e| format!("--today: {e}\n{USAGE}"))?;
                cfg.today = Some(value);
            }
            "--decided" => {
                let (a, b) = value
                    .split_once('~')
                    .ok_or(format!("--decided: FROM~TO as YYYYMMDD~YYYYMMDD\n{USAGE}"))?;
                lawsync_tests::lookalike::Corpus::decided_within(0, a, b).ok_or(format!(
                    "--decided: two dates YYYYMMDD~YYYYMMDD, the first not after the second\n{USAGE}"
                ))?;
                cfg.decided = Some((a.to_owned(), b.to_owned()));
            }
            "--log" => cfg.log_file = Some(value.into()),
            "--page-limit" => {
                let depth = u32::try_from(number(&value)?)
                    .ok()
                    .filter(|&d| d > 0)
                    .ok_or(format!(
                        "--page-limit: a page number from 1, got {value}\n{USAGE}"
                    ))?;
                cfg.quirks.page_limit = Some(PageLimit {
                    depth,
                    beyond: Beyond::NoHits,
                });
            }
            "--inject" => inject.push(serde_json::from_str(&value).map_err(|e| format!("--inject: {e}"))?),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    match (&mut cfg.quirks.page_limit, limit_error) {
        (Some(limit), true) => limit.beyond = Beyond::Error,
        (None, true) => return Err(format!("--page-limit-error needs --page-limit D\n{USAGE}")),
        _ => {}
    }
    if cfg.oc.is_empty() {
        return Err(format!("--oc is required\n{USAGE}"));
    }
    Ok((port, cfg, inject))
}

#[tokio::main]
async fn main() {
    let (port, cfg, inject) = match parse() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("law-lookalike: {e}");
            std::process::exit(2);
        }
    };
    let server = match Lookalike::bind(&format!("127.0.0.1:{port}"), cfg).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("law-lookalike: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    for i in inject {
        server.inject(i);
    }
    println!("listening {}", server.base_url);
    let _ = tokio::signal::ctrl_c().await;
}
