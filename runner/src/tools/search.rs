//! `glob` and `grep`: searching the workdir without following symlinks out of it.

use std::io::{BufReader, Read};
use std::time::SystemTime;

use globset::GlobBuilder;
use regex::RegexBuilder;
use serde::Deserialize;
use serde_json::Value;
use walkdir::WalkDir;

use super::files::BINARY_SNIFF_BYTES;
use super::path::{Confinement, Resolved, display_rel};
use super::{MAX_LINE_CHARS, ToolOutput, clip_line, parse_input, read_line_capped, text_block};

/// Most paths `glob` lists.
pub(crate) const MAX_GLOB_RESULTS: usize = 200;
/// Cap on `grep` output.
pub(crate) const MAX_GREP_OUTPUT_BYTES: usize = 100 * 1024;

#[derive(Deserialize)]
struct GlobInput {
    pattern: String,
    path: Option<String>,
}

#[derive(Deserialize)]
struct GrepInput {
    pattern: String,
    path: Option<String>,
}

/// `glob`: files under `path` matching `pattern`, newest first.
pub(crate) fn glob(conf: &Confinement, input: &Value) -> ToolOutput {
    let input: GlobInput = match parse_input("glob", input) {
        Ok(input) => input,
        Err(output) => return output,
    };
    let matcher = match GlobBuilder::new(&input.pattern).literal_separator(true).build() {
        Ok(glob) => glob.compile_matcher(),
        Err(e) => return ToolOutput::error(format!("invalid glob pattern {:?}: {e}", input.pattern)),
    };
    let base = match search_root(conf, input.path.as_deref()) {
        Ok(base) => base,
        Err(message) => return ToolOutput::error(message),
    };
    if !base.abs.is_dir() {
        return ToolOutput::error(format!("not a directory: {}", base.given));
    }
    let mut found: Vec<(SystemTime, String)> = Vec::new();
    for entry in WalkDir::new(&base.abs).follow_links(false).min_depth(1).into_iter().filter_map(Result::ok) {
        let Ok(relative) = entry.path().strip_prefix(&base.abs) else { continue };
        if !matcher.is_match(relative) {
            continue;
        }
        let meta = if entry.file_type().is_symlink() {
            // A link is listed only when it leads to a file that is itself inside the workdir.
            match std::fs::canonicalize(entry.path()) {
                Ok(real) if real.starts_with(conf.root()) => std::fs::metadata(&real).ok(),
                _ => None,
            }
        } else {
            entry.metadata().ok()
        };
        let Some(meta) = meta.filter(std::fs::Metadata::is_file) else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        found.push((modified, display_rel(conf.root(), entry.path())));
    }
    if found.is_empty() {
        return ToolOutput::text("(no matches)");
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let listing = found.iter().take(MAX_GLOB_RESULTS).map(|(_, path)| path.as_str()).collect::<Vec<_>>().join("\n");
    let mut output = ToolOutput::text(listing);
    if total > MAX_GLOB_RESULTS {
        output.content.push(text_block(format!(
            "(showing the {MAX_GLOB_RESULTS} newest of {total} matches; narrow the pattern or path to see the rest)"
        )));
    }
    output
}

/// `grep`: lines matching a regex in a file or under a directory, as `path:line:text`.
pub(crate) fn grep(conf: &Confinement, input: &Value) -> ToolOutput {
    let input: GrepInput = match parse_input("grep", input) {
        Ok(input) => input,
        Err(output) => return output,
    };
    let regex = match RegexBuilder::new(&input.pattern).build() {
        Ok(regex) => regex,
        Err(e) => return ToolOutput::error(format!("invalid regex {:?}: {e}", input.pattern)),
    };
    let base = match search_root(conf, input.path.as_deref()) {
        Ok(base) => base,
        Err(message) => return ToolOutput::error(message),
    };
    let mut out = String::new();
    let mut truncated = false;
    let walker = WalkDir::new(&base.abs).follow_links(false).sort_by_file_name();
    for entry in walker.into_iter().filter_map(Result::ok) {
        // Links are skipped (as ripgrep does): following them would duplicate or leave the tree.
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(conf.root()) else { continue };
        let display = display_rel(conf.root(), entry.path());
        let target = Resolved {
            given: display.clone(),
            rel: rel.to_path_buf(),
            abs: entry.path().to_path_buf(),
            final_is_symlink: false,
        };
        if !grep_file(conf, &target, &regex, &mut out) {
            truncated = true;
            break;
        }
    }
    if out.is_empty() {
        return ToolOutput::text("(no matches)");
    }
    if truncated {
        out.push_str(&format!("[output truncated at {MAX_GREP_OUTPUT_BYTES} bytes; narrow the pattern or path]\n"));
    }
    ToolOutput::text(out)
}

/// Appends `file`'s matching lines to `out`; false once the output cap is reached.
fn grep_file(conf: &Confinement, file: &Resolved, regex: &regex::Regex, out: &mut String) -> bool {
    let Ok((handle, meta)) = conf.open_read(file) else { return true };
    if !meta.is_file() {
        return true;
    }
    let mut handle = handle;
    let mut head = Vec::new();
    if (&mut handle).take(BINARY_SNIFF_BYTES).read_to_end(&mut head).is_err() || head.contains(&0) {
        return true;
    }
    let mut reader = BufReader::new(std::io::Cursor::new(head).chain(handle));
    let mut line = Vec::new();
    let mut number = 0u64;
    while let Ok(true) = read_line_capped(&mut reader, &mut line, MAX_LINE_CHARS * 4) {
        number += 1;
        let text = String::from_utf8_lossy(&line);
        if !regex.is_match(&text) {
            continue;
        }
        let entry = format!("{}:{number}:{}\n", file.given, clip_line(&text));
        if out.len() + entry.len() > MAX_GREP_OUTPUT_BYTES {
            return false;
        }
        out.push_str(&entry);
    }
    true
}

fn search_root(conf: &Confinement, path: Option<&str>) -> Result<Resolved, String> {
    let resolved = conf.resolve(path.unwrap_or("."))?;
    if !resolved.abs.exists() {
        return Err(format!("no such file or directory: {}", resolved.given));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn glob_pattern_is_relative_to_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/a.rs"), "").unwrap();
        std::fs::write(root.join("src/deep/b.rs"), "").unwrap();
        std::fs::write(root.join("top.rs"), "").unwrap();
        let conf = Confinement::new(root, None).unwrap();
        let out = glob(&conf, &json!({"pattern": "*.rs", "path": "src"}));
        assert_eq!(out.text_content(), "src/a.rs");
        let out = glob(&conf, &json!({"pattern": "**/*.rs", "path": "src"}));
        let mut lines: Vec<_> = out.text_content().lines().map(str::to_owned).collect();
        lines.sort();
        assert_eq!(lines, ["src/a.rs", "src/deep/b.rs"]);
    }
}
