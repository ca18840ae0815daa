//! `docs/first-deploy.md` works as written, as far as it can be checked without AWS: every
//! message it tells an operator to send is one the search function reads; every stack
//! output it names, the template has; every `make` target it runs, the Makefile has; every
//! log message it shows, the code writes; and the README's deploy section points to it.

use lawsync::app::sqs::{Message, MessageKind, parse_message};

fn read(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(start) {
        let after = &rest[i + start.len()..];
        let Some(j) = after.find(end) else { break };
        out.push(&after[..j]);
        rest = &after[j..];
    }
    out
}

#[test]
fn the_messages_it_sends_are_ones_the_search_function_reads() {
    let doc = read("docs/first-deploy.md");
    // The bodies as the shell passes them: quotes unescaped, the commands' output filled in.
    let bodies: Vec<String> = between(&doc, "--message-body \"", "\"\n")
        .into_iter()
        .map(|b| {
            b.replace("\\\"", "\"")
                .replace("$(date -u +%Y-%m-%dT%H:%M:%SZ)", "2026-12-03T05:00:00Z")
                .replace("$(TZ=Asia/Seoul date +%Y%m%d)", "20261203")
        })
        .collect();
    assert!(
        between(&doc, "--message-body '", "'").is_empty(),
        "every body in one quoting"
    );
    let kinds: Vec<&str> = bodies
        .iter()
        .map(|body| match parse_message(MessageKind::Search, body) {
            Ok(Message::Schedule(_)) => "schedule",
            Ok(Message::Backfill(_)) => "backfill",
            Ok(_) => "another search",
            Err(e) => panic!("{body}: {e}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["schedule", "backfill"],
        "the daily run's message, then the backfill's"
    );
}

#[test]
fn the_outputs_targets_and_log_lines_it_names_exist() {
    let doc = read("docs/first-deploy.md");
    let template = read("infra/template.yaml");
    let outputs = &template[template.find("\nOutputs:").expect("Outputs")..];
    for (i, _) in doc.match_indices(" output>") {
        let output = &doc[doc[..i].rfind('<').expect("<") + 1..i];
        assert!(
            outputs.contains(&format!("\n  {output}:")),
            "the template has no output {output}"
        );
    }
    for name in ["EgressIp", "OcSecret", "SearchQueueUrl", "DocumentBucket"] {
        assert!(doc.contains(name), "{name}");
    }
    let makefile = read("Makefile");
    for line in doc.lines().filter_map(|l| l.trim().strip_prefix("make ")) {
        let target = line.split_whitespace().next().unwrap_or_default();
        assert!(
            makefile.contains(&format!("\n{target}:")),
            "the Makefile has no target {target}"
        );
    }
    // The messages the functions log, quoted in the runbook.
    let code: String = [
        "src/app/schedule.rs",
        "src/lambda.rs",
        "src/law/mod.rs",
        "src/app/sqs.rs",
        "src/app/backfill.rs",
    ]
    .iter()
    .map(|f| read(&format!("shared/{f}")))
    .collect();
    for message in between(&doc, "\"message\":\"", "\"") {
        assert!(
            code.contains(&format!("\"{message}\"")),
            "no code logs {message:?}"
        );
    }
    let readme = read("README.md");
    assert!(
        readme.contains("(docs/first-deploy.md)"),
        "the README's deploy section links the runbook"
    );
}
