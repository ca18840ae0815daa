//! `lua-dump DIR`: writes every Lua script as Redis runs it (its includes pasted, its keys
//! bound by name) to `DIR/<name>.lua`, with its key names in `DIR/<name>.keys`, one per
//! line in KEYS order: for reading the assembled text, and for harnesses outside Rust that
//! drive the real scripts.
#![allow(clippy::print_stdout)] // a one-line report

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: lua-dump DIR");
        std::process::exit(2);
    };
    let dir = std::path::Path::new(&dir);
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("lua-dump: cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for s in lawsync::lua::ALL {
        let write = |ext: &str, text: String| {
            let path = dir.join(format!("{}.{ext}", s.name()));
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!("lua-dump: cannot write {}: {e}", path.display());
                std::process::exit(1);
            }
        };
        write("lua", s.assembled());
        write("keys", s.key_names().join("\n") + "\n");
    }
    println!(
        "lua-dump: {} scripts in {}",
        lawsync::lua::ALL.len(),
        dir.display()
    );
}
