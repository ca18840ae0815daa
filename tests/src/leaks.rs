//! Where a key or an upstream body could leak to, as text a test can search: every Redis
//! key of a namespace with its value, and every file under a folder.

use std::path::Path;

use lawsync::Namespace;

/// Every key of `ns` on the standalone Redis at `url`, one line per key with its type and
/// its whole value (strings, hashes, lists, sets, sorted sets with scores, streams).
pub async fn redis_text(url: &str, ns: &Namespace) -> String {
    let client = redis::Client::open(url).expect("redis url");
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection");
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{}*", ns.tag()))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut con)
            .await
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    let mut out = String::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut con)
            .await
            .expect("TYPE");
        let (command, args): (&str, &[&str]) = match kind.as_str() {
            "string" => ("GET", &[]),
            "hash" => ("HGETALL", &[]),
            "list" => ("LRANGE", &["0", "-1"]),
            "set" => ("SMEMBERS", &[]),
            "zset" => ("ZRANGE", &["0", "-1", "WITHSCORES"]),
            "stream" => ("XRANGE", &["-", "+"]),
            _ => continue, // expired between SCAN and TYPE
        };
        let value: redis::Value = redis::cmd(command)
            .arg(&key)
            .arg(args)
            .query_async(&mut con)
            .await
            .expect("read value");
        out.push_str(&format!("{key} {kind} {}\n", flatten(&value)));
    }
    out
}

fn flatten(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(i) => i.to_string(),
        redis::Value::Double(d) => d.to_string(),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.iter().map(flatten).collect::<Vec<_>>().join(" ")
        }
        redis::Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| format!("{} {}", flatten(k), flatten(v)))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}

/// Every file under `dir` (recursively), each as its path and its text.
pub fn dir_text(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&dir_text(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap_or_default();
            out.push_str(&format!(
                "{}\n{}\n",
                path.display(),
                String::from_utf8_lossy(&bytes)
            ));
        }
    }
    out
}

/// Panics naming `place` if any needle occurs in `text`.
pub fn assert_nowhere(place: &str, text: &str, needles: &[&str]) {
    for needle in needles {
        if let Some(at) = text.find(needle) {
            let start = text[..at].char_indices().rev().nth(80).map_or(0, |(i, _)| i);
            let context = &text[start..(at + needle.len()).min(text.len())];
            panic!("{needle:?} leaked into {place}: ...{context}");
        }
    }
}
