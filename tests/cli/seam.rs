//! The shape of `src/`, read from the source itself.
//!
//! One seam for shared state (issue 20): every persisted operation (a breaker's
//! load-apply-store, the log's append, read and resolve, its counters, the loop guard's
//! rejections, the hooks' per-session files) lives in the store module that owns it
//! (`store::breakers`, `store::error_log`, `store::rejections`, `store::sessions`), whatever
//! the backend; the commands are glue over them and never over one another.
//!
//! The layers (see `src/lib.rs`): the edge (`cli`, `commands`, `hook`, ...) over `exec` over
//! `store` over `core`, with `exit` below them all. The file graph is built from each file's
//! `use crate::…` lines (groups expanded), its inline `crate::…` paths and its `super::…`
//! paths, each resolved to the file of the longest module it names; test code
//! (`#[cfg(test)]` modules and the files they declare) is left out, and so is a file's edge to
//! its own ancestor (how a child names what its parent re-exports). No edge may go up a layer,
//! and no two files may import each other, however indirectly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code lines of a file (comments and doc comments left out), with their numbers.
fn code(path: &Path) -> Vec<(usize, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(n, l)| (n + 1, l.to_string()))
        .collect()
}

/// The command a file under `src/commands` belongs to (`hook` for `hook/log_tail.rs`).
fn owner(commands: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(commands).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn violations(check: impl Fn(&str, &str) -> Option<String>) -> Vec<String> {
    let commands = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
    let mut files = Vec::new();
    sources(&commands, &mut files);
    assert!(files.len() > 10, "the commands' sources were not found");
    let mut found = Vec::new();
    for f in &files {
        let me = owner(&commands, f);
        for (n, line) in code(f) {
            if let Some(why) = check(&me, &line) {
                found.push(format!("{}:{n}: {why}: {}", f.display(), line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_command_calls_another_commands_breaker_log_or_session_code() {
    // What used to be shared this way: the breaker calls, record/resolve/recover, the hook's
    // session files, the report's log path.
    let owned = [
        "breaker",
        "record_error",
        "report",
        "hook",
        "errors",
        "store",
    ];
    let found = violations(|me, line| {
        owned
            .iter()
            .filter(|m| **m != me)
            .find(|m| line.contains(&format!("commands::{m}")))
            .map(|m| format!("`{me}` reaches into `commands::{m}`"))
            .or_else(|| {
                line.contains("super::super::")
                    .then(|| "reaches into a parent command".to_string())
            })
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_command_opens_the_shared_state_itself() {
    // The files, keys and streams the domain modules own, and the store calls that write the
    // log outside its seam.
    let owned = [
        "join(\"breakers\")",
        "join(\"sessions\")",
        "join(\"rejections\")",
        "errors.counters",
        "errors.pending",
        "breaker-events.jsonl",
        "fleet.outbox",
        "fleet::log::",
        "breaker_put_new",
        "read_log(",
        "Append {",
        "store::append_line",
        "store::move_lines",
        "Follower::at_end",
    ];
    let found = violations(|_, line| {
        owned
            .iter()
            .find(|o| line.contains(*o))
            .map(|o| format!("uses `{o}`"))
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_command_names_another_command() {
    // A command is argument parsing, one call into the library and the answer: what two
    // commands share lives below them both.
    let found = violations(|me, line| {
        line.contains("commands::")
            .then(|| format!("`{me}` names a command (commands::…); move what it needs below"))
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

// --- The layers and the file graph. ----------------------------------------------------------

/// A layer, lowest first; `exit` (Failure, ExitStatus) is below them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Foundation,
    Core,
    Store,
    Exec,
    Edge,
}

fn layer(module: &str) -> Layer {
    match module.split("::").next().unwrap_or_default() {
        "exit" => Layer::Foundation,
        "core" => Layer::Core,
        // The Linux-only calls and their fallbacks: I/O, so never the core's.
        "store" | "platform" => Layer::Store,
        "exec" => Layer::Exec,
        _ => Layer::Edge,
    }
}

/// `src/a/b.rs` → `a::b`; `lib.rs` is the root (`""`); `main.rs` (the binary) is left out.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap().with_extension("");
            let module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("::");
            let module = if module == "lib" {
                String::new()
            } else {
                module
            };
            (module, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// The code that ships: comments and `#[cfg(test)]` items left out. Also the child modules a
/// file declares test-only (`#[cfg(test)] mod tests;`).
fn shipped(text: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let (mut code, mut test_children) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line.starts_with("#[cfg(test)]") {
            let next = lines.get(i + 1).map_or("", |l| l.trim());
            let decl = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                test_children.push(name.trim().to_string());
                i += 2;
                continue;
            }
            if decl.starts_with("mod ") && next.ends_with('{') {
                // Skip to the brace that closes the module.
                let mut depth = 0i32;
                let mut j = i + 1;
                while j < lines.len() {
                    depth += lines[j].matches('{').count() as i32;
                    depth -= lines[j].matches('}').count() as i32;
                    if depth == 0 {
                        break;
                    }
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            i += 2;
            continue;
        }
        if !line.starts_with("//") {
            code.push(lines[i]);
        }
        i += 1;
    }
    (code.join("\n"), test_children)
}

/// A `use` tree as the paths it names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = tree.find('{') else {
        return vec![tree
            .split(" as ")
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()];
    };
    let head = &tree[..open];
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut parts, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in body.chars() {
        match c {
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth -= 1;
                cur.push(c);
            }
            c => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(&format!("{head}{p}")))
        .collect()
}

/// The module paths a file's code names, as paths from the crate root: `crate::…` in `use`
/// declarations and inline, `super::…` resolved against `module` (the file's own), and the
/// paths through a module a `use` named (`use crate::store::files;` then `files::lock`). A
/// path ends at its first type (`context::Context::new` is `context::Context`).
fn named(code: &str, module: &str) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = BTreeSet::new();
    // The names `use` binds to modules: `files` for `use crate::store::files;`, `store` for
    // `use super::{self as store}`.
    let mut bound: BTreeMap<String, String> = BTreeMap::new();
    // `use` declarations, groups expanded (they may span lines); the rest is scanned inline.
    let mut inline = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before_ok = at == 0 || !rest[..at].ends_with(ident);
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        let tree = after[..end].trim();
        let ours = before_ok && (tree.starts_with("crate::") || tree.starts_with("super::"));
        if !ours {
            inline.push_str(&rest[..at + 4]);
            rest = after;
            continue;
        }
        for p in expand(tree) {
            let (path, alias) = match p.split_once(" as ") {
                Some((path, alias)) => (path.trim(), Some(alias.trim())),
                None => (p.as_str(), None),
            };
            let full = from_root(path, module);
            let last = path
                .trim_end_matches("::self")
                .rsplit("::")
                .next()
                .unwrap_or_default();
            if last.starts_with(|c: char| c.is_ascii_lowercase())
                && !full.contains(char::is_uppercase)
            {
                bound.insert(alias.unwrap_or(last).to_string(), full.clone());
            }
            found.insert(full);
        }
        inline.push_str(&rest[..at]);
        rest = &after[end..];
    }
    inline.push_str(rest);
    // Inline paths: `crate::a::b`, `super::a`, and `name::a` for a module `use` named.
    let mut prefixes: Vec<(String, Option<&String>)> =
        vec![("crate::".to_string(), None), ("super::".to_string(), None)];
    prefixes.extend(
        bound
            .iter()
            .map(|(name, full)| (format!("{name}::"), Some(full))),
    );
    for (prefix, through) in &prefixes {
        let mut rest = inline.as_str();
        while let Some(at) = rest.find(prefix.as_str()) {
            let before_ok = at == 0 || !(rest[..at].ends_with(ident) || rest[..at].ends_with(':'));
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(ident(c) || c == ':'))
                .unwrap_or(tail.len());
            let path = tail[..len].trim_end_matches(':');
            if before_ok {
                found.insert(match through {
                    None => from_root(path, module),
                    Some(full) => {
                        let rest_of = &path[prefix.len().min(path.len())..];
                        from_root(&format!("crate::{full}::{rest_of}"), module)
                    }
                });
            }
            rest = &rest[at + prefix.len()..];
        }
    }
    found.remove("");
    found
}

/// `path` (`crate::…`, `super::…`, `super::super::…`) from the crate root.
fn from_root(path: &str, module: &str) -> String {
    // Up to the first type; `self` in a group names the module itself.
    let mut kept = Vec::new();
    for seg in path.split("::").filter(|s| *s != "self") {
        kept.push(seg);
        if seg.starts_with(|c: char| c.is_ascii_uppercase()) {
            break;
        }
    }
    let path = kept.join("::");
    if let Some(p) = path.strip_prefix("crate::") {
        return p.to_string();
    }
    let mut base: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    base.pop();
    let mut segs: Vec<&str> = path.split("::").collect();
    // The first `super` is the parent, already in `base`; each further one climbs.
    segs.remove(0);
    while segs.first() == Some(&"super") {
        segs.remove(0);
        base.pop();
    }
    base.extend(segs);
    base.join("::")
}

/// The file whose module is the longest prefix of `path`.
fn resolve<'m>(path: &str, modules: &'m BTreeMap<String, String>) -> Option<&'m str> {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find_map(|m| modules.get_key_value(&m).map(|(k, _)| k.as_str()))
}

/// The import graph of the shipped code: file → files it names (ancestors left out); and
/// every name that goes up a layer.
fn graph(modules: &BTreeMap<String, String>) -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let mut test_only: Vec<String> = Vec::new();
    let mut code = BTreeMap::new();
    for (m, text) in modules {
        let (shipped, children) = shipped(text);
        for c in children {
            test_only.push(if m.is_empty() { c } else { format!("{m}::{c}") });
        }
        code.insert(m.clone(), shipped);
    }
    let is_test = |m: &str| {
        test_only
            .iter()
            .any(|t| m == t || m.starts_with(&format!("{t}::")))
    };
    let (mut edges, mut up) = (BTreeMap::new(), Vec::new());
    for (m, code) in &code {
        if m.is_empty() || is_test(m) {
            continue;
        }
        let mut to = BTreeSet::new();
        for path in named(code, m) {
            let Some(target) = resolve(&path, modules) else {
                continue;
            };
            if layer(target) > layer(m) {
                up.push(format!(
                    "{m} ({:?}) names {path} ({:?})",
                    layer(m),
                    layer(target)
                ));
            }
            let ancestor = target.is_empty() || m.starts_with(&format!("{target}::"));
            if target != m && !ancestor {
                to.insert(target.to_string());
            }
        }
        edges.insert(m.clone(), to);
    }
    (edges, up)
}

/// The strongly connected components of more than one file (Tarjan's), each with its edges.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(lw));
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.found.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.found
}

fn src_graph() -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let modules = modules(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(modules.len() > 100, "the sources were not found");
    let (edges, up) = graph(&modules);
    let named: usize = edges.values().map(BTreeSet::len).sum();
    assert!(
        named > 300,
        "only {named} imports found: the reader is broken"
    );
    (edges, up)
}

#[test]
fn no_import_goes_up_the_layers() {
    let (_, up) = src_graph();
    assert!(
        up.is_empty(),
        "imports that go up a layer:\n{}",
        up.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_cycle() {
    let (edges, _) = src_graph();
    let found: Vec<String> = cycles(&edges)
        .into_iter()
        .map(|c| {
            let inside: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("  {a} -> {b}"))
                })
                .collect();
            format!("{}:\n{}", c.join(", "), inside.join("\n"))
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The reader on sources made up here: each rule fails when it should.
#[test]
fn the_graph_reader_finds_upward_imports_cycles_and_skips_tests() {
    let files: BTreeMap<String, String> = [
        ("", "pub mod core;\npub mod store;\npub mod context;"),
        ("core", "pub mod a;\npub mod b;"),
        (
            "core::a",
            "use crate::store::{files::{self, Lock}, sessions};\nuse super::b::X;\n\
             #[cfg(test)]\nmod tests {\n    use crate::context::Context;\n}\n",
        ),
        (
            "core::b",
            "// crate::store::files in a comment\nfn f() { crate::core::a::g() }",
        ),
        ("store", "pub mod files;\npub mod sessions;"),
        (
            "store::files",
            "use crate::context::Context;\nuse super::sessions;",
        ),
        ("store::sessions", "use crate::context::{Context, Answer};"),
        ("context", "pub struct Context;\npub struct Answer;"),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_string(), t.to_string()))
    .collect();
    let (edges, mut up) = graph(&files);
    up.sort();
    assert_eq!(
        up,
        [
            "core::a (Core) names store::files (Store)",
            "core::a (Core) names store::files::Lock (Store)",
            "core::a (Core) names store::sessions (Store)",
            "store::files (Store) names context::Context (Edge)",
            "store::sessions (Store) names context::Answer (Edge)",
            "store::sessions (Store) names context::Context (Edge)",
        ]
    );
    assert_eq!(
        cycles(&edges),
        [vec!["core::a".to_string(), "core::b".to_string()]]
    );
    assert!(edges["store::files"].contains("store::sessions"));
    assert!(
        !edges["store::files"].contains("store"),
        "a parent is not an edge"
    );
}
