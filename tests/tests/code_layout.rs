//! The shape rules of docs/ARCHITECTURE.md that a reviewer would otherwise check by eye:
//! no two source files of a crate import each other (directly or through a cycle), no
//! file grows past 800 lines, and no function needs `too_many_arguments`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates whose `src/` is checked.
const CRATES: &[&str] = &["src", "proto/src", "schema/src", "gateway/src", "worker/src", "runner/src", "tests/src"];

/// Past this many lines a file is a sign to split by responsibility (STYLE.md).
const MAX_LINES: usize = 800;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the tests crate sits in the workspace").to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under a crate root: `managed/events.rs` → `managed::events`,
/// `adapters/mod.rs` → `adapters`, `lib.rs` / `main.rs` → ``.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(root).expect("file under its root");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a file without its `#[cfg(test)]` tail (inline test modules `use super::*`,
/// which names the file itself) and without comments.
fn code_of(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    body.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path named after `crate::` or `super::` (groups in braces expanded), as module
/// path segments relative to the crate root.
fn referenced_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &code[i..];
        let start_ok =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        let base: Option<(Vec<String>, usize)> = if start_ok && rest.starts_with("crate::") {
            Some((Vec::new(), "crate::".len()))
        } else if start_ok && rest.starts_with("super::") {
            // A file's module path already names a `mod.rs` by its directory, so `super`
            // is one segment up for every kind of file.
            let mut parent = module.to_vec();
            let mut consumed = 0;
            let mut cursor = rest;
            while cursor.starts_with("super::") {
                parent.pop();
                consumed += "super::".len();
                cursor = &cursor["super::".len()..];
            }
            Some((parent, consumed))
        } else {
            None
        };
        match base {
            Some((prefix, consumed)) => {
                let (paths, used) = parse_tree(&code[i + consumed..]);
                for path in paths {
                    let mut full = prefix.clone();
                    full.extend(path);
                    out.push(full);
                }
                i += consumed + used.max(1);
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}

/// Parses `a::b::{c, d::e}` into its leaf paths; returns them and the bytes consumed.
fn parse_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut i = 0;
    let bytes = text.as_bytes();
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            segments.push(text[start..i].to_owned());
        }
        let group = if text[i..].starts_with("::{") {
            Some(3)
        } else if segments.is_empty() && text[i..].starts_with('{') {
            Some(1) // `use super::{a, b}`
        } else {
            None
        };
        if let Some(open) = group {
            i += open;
            let mut paths = Vec::new();
            loop {
                while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b',') {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    i += 1;
                    break;
                }
                let (inner, used) = parse_tree(&text[i..]);
                for path in inner {
                    let mut full = segments.clone();
                    full.extend(path);
                    paths.push(full);
                }
                i += used.max(1);
                // Skip `as name` and anything else up to the separator.
                while i < bytes.len() && bytes[i] != b',' && bytes[i] != b'}' {
                    i += 1;
                }
            }
            return (paths, i);
        }
        if text[i..].starts_with("::") {
            i += 2;
            continue;
        }
        return (vec![segments], i);
    }
}

struct Crate {
    /// module path → file
    files: BTreeMap<Vec<String>, PathBuf>,
    /// file → the other files of the crate it names
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

fn load(root: &Path) -> Crate {
    let mut paths = Vec::new();
    rust_files(root, &mut paths);
    let files: BTreeMap<Vec<String>, PathBuf> = paths.iter().map(|p| (module_of(root, p), p.clone())).collect();
    let mut edges = BTreeMap::new();
    for (module, file) in &files {
        let text = fs::read_to_string(file).expect("readable source");
        let mut targets = BTreeSet::new();
        for path in referenced_paths(&code_of(&text), module) {
            // The longest prefix that is a file is the file depended on.
            let target = (1..=path.len()).rev().find_map(|n| files.get(&path[..n]));
            if let Some(target) = target.filter(|t| *t != file) {
                targets.insert(target.clone());
            }
        }
        edges.insert(file.clone(), targets);
    }
    Crate { files, edges }
}

/// One cycle through `edges`, if there is any (depth-first search with colours).
fn find_cycle(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        node: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                0 => {
                    if let Some(cycle) = visit(next, edges, state, stack) {
                        return Some(cycle);
                    }
                }
                1 => {
                    let from = stack.iter().position(|n| n == next).expect("on the stack");
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if state.get(node).copied().unwrap_or(0) == 0
            && let Some(cycle) = visit(node, edges, &mut state, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace()).unwrap_or(path).display().to_string()
}

#[test]
fn no_import_cycles_between_files() {
    let mut cycles = Vec::new();
    for dir in CRATES {
        let krate = load(&workspace().join(dir));
        assert!(!krate.files.is_empty(), "{dir}: no sources found");
        // Report every cycle, not only the first: remove one edge of each found and look again.
        let mut edges = krate.edges.clone();
        while let Some(cycle) = find_cycle(&edges) {
            cycles.push(cycle.iter().map(|p| relative(p)).collect::<Vec<_>>().join(" → "));
            let (a, b) = (&cycle[0], &cycle[1]);
            edges.get_mut(a).expect("a node").remove(b);
        }
    }
    assert!(cycles.is_empty(), "files that import each other:\n{}", cycles.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle() {
    let files: Vec<(Vec<String>, &str)> = vec![
        (vec!["a".into()], "use crate::b::{x, c::y};"),
        (vec!["b".into()], "fn f() { super::{a::z}() }"),
        (vec!["b".into(), "c".into()], "use crate::d;"),
    ];
    let module_names: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, code) in &files {
        let from = PathBuf::from(module.join("/"));
        let targets = referenced_paths(code, module)
            .into_iter()
            .filter_map(|path| {
                (1..=path.len()).rev().find(|n| module_names.contains(&path[..*n])).map(|n| path[..n].join("/"))
            })
            .map(PathBuf::from)
            .filter(|t| *t != from)
            .collect();
        edges.insert(from, targets);
    }
    let cycle = find_cycle(&edges).expect("a ↔ b is a cycle");
    assert_eq!(cycle.first(), cycle.last());
    assert!(edges[&PathBuf::from("a")].contains(&PathBuf::from("b/c")), "braced paths resolve to the deepest file");
}

#[test]
fn no_file_past_the_split_line() {
    let mut long = Vec::new();
    for dir in CRATES {
        let mut files = Vec::new();
        rust_files(&workspace().join(dir), &mut files);
        for file in files {
            let lines = fs::read_to_string(&file).expect("readable source").lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", relative(&file)));
            }
        }
    }
    assert!(long.is_empty(), "files past {MAX_LINES} lines; split them by responsibility:\n{}", long.join("\n"));
}

#[test]
fn no_function_needs_too_many_arguments() {
    let mut found = Vec::new();
    for dir in CRATES.iter().copied().chain(["tests/tests"]) {
        let mut files = Vec::new();
        rust_files(&workspace().join(dir), &mut files);
        for file in files {
            let text = fs::read_to_string(&file).expect("readable source");
            if text.contains(concat!("clippy::", "too_many_arguments")) {
                found.push(relative(&file));
            }
        }
    }
    assert!(found.is_empty(), "take a request struct instead of allowing too_many_arguments:\n{}", found.join("\n"));
}
