//! The law.go.kr look-alike as a program, for the demo and for trying a client by hand.
//!
//! ```text
//! law-lookalike --oc KEY [--port 0] [--interval-ms 1000] [--seed 1] [--today YYYYMMDD] [--log FILE] [--inject JSON]...
//! ```
//! `--today` hides what the corpus publishes after that day (and revisions after it), until
//! `POST /_control/today` moves it.
//! Prints `listening <base URL>` on stdout once it accepts, then a line per call on stderr.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use lawsync_tests::lookalike::{Injection, Lookalike, LookalikeConfig, check_today};

const USAGE: &str = "usage: law-lookalike --oc KEY [--port N] [--interval-ms MS (0 = no rule)] [--seed N] [--today YYYYMMDD] [--log FILE] [--inject JSON]... [--quiet]";

fn parse() -> Result<(u16, LookalikeConfig, Vec<Injection>), String> {
    let mut args = std::env::args().skip(1);
    let mut cfg = LookalikeConfig::new("");
    cfg.echo = true;
    let mut port = 0u16;
    let mut inject = Vec::new();
    while let Some(flag) = args.next() {
        if flag == "--quiet" {
            cfg.echo = false;
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
            "--log" => cfg.log_file = Some(value.into()),
            "--inject" => inject.push(serde_json::from_str(&value).map_err(|e| format!("--inject: {e}"))?),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
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
