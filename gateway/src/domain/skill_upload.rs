//! A skill upload (docs/api/skills.md): the files of a `files[]` multipart upload (or
//! of one uploaded zip) checked into a skill version — one top-level directory,
//! `SKILL.md` at its root with front matter `name` and `description`, paths safe to
//! unpack, limits on files and bytes — and the zip archive stored for it.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

use bytes::Bytes;

use super::{DomainError, DomainResult};

/// Files in one version, at most.
pub const MAX_FILES: usize = 1_000;

/// Bytes of one version's files, unpacked, at most (50 MB).
pub const MAX_UNPACKED_BYTES: u64 = 50_000_000;

/// A skill name's longest form (kebab-case slug), in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// A front matter `description`'s longest form, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1_024;

/// One relative path's longest form, in bytes.
const MAX_PATH_BYTES: usize = 1_024;

/// The skill's root file.
const SKILL_MD: &str = "SKILL.md";

/// Counts an upload while its parts are read, so nothing past the limits is buffered.
#[derive(Debug, Default)]
pub struct UploadBudget {
    files: usize,
    bytes: u64,
}

impl UploadBudget {
    /// One more file part.
    pub fn add_file(&mut self) -> DomainResult<()> {
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(DomainError::invalid(format!("files: a skill version holds at most {MAX_FILES} files")));
        }
        Ok(())
    }

    /// `n` more bytes of file content.
    pub fn add_bytes(&mut self, n: usize) -> DomainResult<()> {
        self.bytes = self.bytes.saturating_add(n as u64);
        if self.bytes > MAX_UNPACKED_BYTES {
            return Err(too_large());
        }
        Ok(())
    }
}

fn too_large() -> DomainError {
    DomainError::invalid(format!("files: a skill version holds at most {MAX_UNPACKED_BYTES} bytes of files, unpacked"))
}

/// One uploaded file: the part's filename (its path, `my-skill/SKILL.md`) and bytes.
#[derive(Debug, Clone)]
pub struct UploadedFile {
    /// The path as sent.
    pub path: String,
    /// Its content.
    pub bytes: Bytes,
}

/// A validated upload: the skill's name and description and its files, by path
/// relative to the skill's directory.
#[derive(Debug, Clone)]
pub struct ParsedSkill {
    /// The kebab-case slug.
    pub name: String,
    /// From the front matter.
    pub description: String,
    /// Relative path → content, in path order.
    pub files: BTreeMap<String, Bytes>,
}

/// Checks one path: relative, `/`-separated, no empty, `.` or `..` segment, no
/// backslash or control character.
fn check_path(path: &str) -> DomainResult<Vec<&str>> {
    let refuse = |why: &str| Err(DomainError::invalid(format!("files: {path:?}: {why}")));
    if path.is_empty() {
        return Err(DomainError::invalid(
            "files: a file part has no filename; its filename is its path, e.g. my-skill/SKILL.md",
        ));
    }
    if path.len() > MAX_PATH_BYTES {
        return refuse(&format!("a path is at most {MAX_PATH_BYTES} bytes"));
    }
    if path.starts_with('/') {
        return refuse("absolute paths are refused; paths are relative, e.g. my-skill/SKILL.md");
    }
    if path.contains('\\') {
        return refuse("backslashes are refused; separate path segments with /");
    }
    if path.chars().any(char::is_control) {
        return refuse("control characters are refused in paths");
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return refuse("`..` segments are refused");
    }
    if segments.iter().any(|s| s.is_empty() || *s == ".") {
        return refuse("empty and `.` path segments are refused");
    }
    if segments.len() < 2 {
        return refuse("every file must be inside one top-level directory (e.g. my-skill/SKILL.md)");
    }
    Ok(segments)
}

/// Whether `name` is a kebab-case slug: lowercase letters and digits in groups joined by
/// single hyphens, at most [`MAX_NAME_CHARS`].
pub fn is_slug(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .split('-')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// The top-level `key: value` pairs of a `---` … `---` front matter (a YAML subset:
/// plain, quoted, and `|` / `>` block scalars; indented lines continue a value).
fn front_matter(text: &str) -> Result<BTreeMap<String, String>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("it must start with a `---` front matter block giving name and description".into());
    }
    let mut body = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        body.push(line);
    }
    if !closed {
        return Err("its front matter has no closing `---` line".into());
    }
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            // A continuation of a key this parser does not keep (a nested map or list).
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("front matter line {line:?} is not `key: value`"));
        };
        let key = key.trim().to_owned();
        let value = value.trim();
        let mut continuation = Vec::new();
        while i < body.len() && (body[i].starts_with([' ', '\t']) || body[i].trim().is_empty()) {
            continuation.push(body[i].trim());
            i += 1;
        }
        while continuation.last().is_some_and(|l| l.is_empty()) {
            continuation.pop();
        }
        let value = match value.trim_end_matches(['-', '+']) {
            "|" => continuation.join("\n"),
            ">" => fold(&continuation),
            _ => {
                let mut all = vec![value];
                all.extend(continuation);
                unquote(&fold(&all))
            }
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// YAML folding: lines joined by spaces, blank lines kept as line breaks.
fn fold(lines: &[&str]) -> String {
    let mut out = String::new();
    for line in lines {
        if line.is_empty() {
            out.push('\n');
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out
}

fn unquote(value: &str) -> String {
    let value = value.trim();
    if value.len() >= 2 {
        if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            return inner.replace("\\\"", "\"").replace("\\n", "\n").replace("\\\\", "\\");
        }
        if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            return inner.replace("''", "'");
        }
    }
    value.to_owned()
}

/// Validates an upload: one top-level directory, `SKILL.md` at its root with front
/// matter `name` (or the directory's name) and `description`, paths safe to unpack.
/// A single `.zip` part is read as the skill's files (see [`unzip`]).
pub fn parse(files: Vec<UploadedFile>) -> DomainResult<ParsedSkill> {
    let files = match files.as_slice() {
        [only] if only.path.to_ascii_lowercase().ends_with(".zip") && only.bytes.starts_with(b"PK") => {
            unzip(&only.bytes)?
        }
        _ => files,
    };
    if files.is_empty() {
        return Err(DomainError::invalid("files: at least one file is required, including <directory>/SKILL.md"));
    }
    if files.len() > MAX_FILES {
        return Err(DomainError::invalid(format!("files: a skill version holds at most {MAX_FILES} files")));
    }
    let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    if total > MAX_UNPACKED_BYTES {
        return Err(too_large());
    }
    let mut top: Option<String> = None;
    let mut out = BTreeMap::new();
    for file in files {
        let segments = check_path(&file.path)?;
        match &top {
            None => top = Some(segments[0].to_owned()),
            Some(dir) if dir != segments[0] => {
                return Err(DomainError::invalid(format!(
                    "files: {:?} is outside the top-level directory {dir:?}; all files must be in one directory",
                    file.path
                )));
            }
            Some(_) => {}
        }
        let relative = segments[1..].join("/");
        if out.contains_key(&relative) {
            return Err(DomainError::invalid(format!("files: {:?} is uploaded twice", file.path)));
        }
        out.insert(relative, file.bytes);
    }
    let top = top.unwrap_or_default();
    let Some(skill_md) = out.get(SKILL_MD) else {
        return Err(DomainError::invalid(format!(
            "files: {top}/{SKILL_MD} is missing; a skill needs SKILL.md at the root of its directory"
        )));
    };
    let path = format!("{top}/{SKILL_MD}");
    let text = std::str::from_utf8(skill_md)
        .map_err(|_| DomainError::invalid(format!("files: {path:?}: SKILL.md must be UTF-8 text")))?;
    let meta = front_matter(text).map_err(|why| DomainError::invalid(format!("files: {path:?}: {why}")))?;
    let name = match meta.get("name").map(|n| n.trim()) {
        Some(name) if !name.is_empty() => {
            if !is_slug(name) {
                return Err(DomainError::invalid(format!(
                    "files: {path:?}: front matter name {name:?} must be kebab-case (lowercase letters, digits and single hyphens, at most {MAX_NAME_CHARS} characters)"
                )));
            }
            name.to_owned()
        }
        _ => {
            if !is_slug(&top) {
                return Err(DomainError::invalid(format!(
                    "files: {path:?}: the front matter has no name, and the directory name {top:?} is not kebab-case to stand in for it"
                )));
            }
            top.clone()
        }
    };
    let description = meta.get("description").map(|d| d.trim().to_owned()).unwrap_or_default();
    if description.is_empty() {
        return Err(DomainError::invalid(format!("files: {path:?}: the front matter needs a non-empty description")));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(DomainError::invalid(format!(
            "files: {path:?}: the description is at most {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    Ok(ParsedSkill { name, description, files: out })
}

/// The files of an uploaded zip archive. Symlinks are refused; sizes are checked as
/// declared and as read (a lying header cannot unpack past the limit).
fn unzip(bytes: &[u8]) -> DomainResult<Vec<UploadedFile>> {
    let bad = |why: String| DomainError::invalid(format!("files: the zip archive {why}"));
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| bad(format!("cannot be read: {e}")))?;
    if archive.len() > MAX_FILES * 2 {
        return Err(DomainError::invalid(format!("files: a skill version holds at most {MAX_FILES} files")));
    }
    let mut budget = UploadBudget::default();
    let mut out = Vec::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| bad(format!("cannot be read: {e}")))?;
        let name = entry.name().map_err(|e| bad(format!("has an unreadable entry name: {e}")))?.into_owned();
        if entry.is_symlink() {
            return Err(DomainError::invalid(format!("files: {name:?}: symlinks are refused")));
        }
        if entry.is_dir() {
            continue;
        }
        budget.add_file()?;
        if entry.size() > MAX_UNPACKED_BYTES {
            return Err(too_large());
        }
        let mut content = Vec::new();
        let mut limited = (&mut entry).take(MAX_UNPACKED_BYTES - budget.bytes + 1);
        limited.read_to_end(&mut content).map_err(|e| bad(format!("entry {name:?} cannot be unpacked: {e}")))?;
        budget.add_bytes(content.len())?;
        out.push(UploadedFile { path: name, bytes: Bytes::from(content) });
    }
    Ok(out)
}

/// The version's archive: every file under one directory named after the skill.
pub fn archive(parsed: &ParsedSkill) -> DomainResult<Bytes> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644)
        .large_file(false);
    let failed = |e: &dyn std::fmt::Display| DomainError::Internal(format!("building a skill archive: {e}"));
    for (path, bytes) in &parsed.files {
        writer.start_file(format!("{}/{path}", parsed.name), options).map_err(|e| failed(&e))?;
        writer.write_all(bytes).map_err(|e| failed(&e))?;
    }
    let cursor = writer.finish().map_err(|e| failed(&e))?;
    Ok(Bytes::from(cursor.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> UploadedFile {
        UploadedFile { path: path.to_owned(), bytes: Bytes::from(text.to_owned()) }
    }

    const SKILL: &str = "---\nname: pdf-tools\ndescription: Reads PDFs.\n---\n# PDF tools\n";

    fn message(error: DomainError) -> String {
        match error {
            DomainError::Invalid { message, .. } => message,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_skill_directory_parses() {
        let parsed =
            parse(vec![file("pdf/SKILL.md", SKILL), file("pdf/scripts/run.py", "print(1)")]).expect("a valid skill");
        assert_eq!(parsed.name, "pdf-tools");
        assert_eq!(parsed.description, "Reads PDFs.");
        assert_eq!(parsed.files.keys().collect::<Vec<_>>(), ["SKILL.md", "scripts/run.py"]);
        let zip = archive(&parsed).unwrap();
        let mut zip = zip::ZipArchive::new(Cursor::new(zip)).unwrap();
        let mut out = String::new();
        zip.by_name("pdf-tools/scripts/run.py").unwrap().read_to_string(&mut out).unwrap();
        assert_eq!(out, "print(1)");
    }

    #[test]
    fn front_matter_forms() {
        let meta = front_matter(
            "---\nname: \"x-y\"\ndescription: >\n  folded\n  text\nmetadata:\n  a: b\nlicense: 'it''s'\n---\nbody",
        )
        .unwrap();
        assert_eq!(meta["name"], "x-y");
        assert_eq!(meta["description"], "folded text");
        assert_eq!(meta["license"], "it's");
        let meta = front_matter("---\nname: a\ndescription: one\n  two\n---\n").unwrap();
        assert_eq!(meta["description"], "one two");
        assert!(front_matter("# no front matter").is_err());
        assert!(front_matter("---\nname: a\n").is_err());
    }

    #[test]
    fn the_name_falls_back_to_the_directory() {
        let parsed = parse(vec![file("my-skill/SKILL.md", "---\ndescription: d\n---\n")]).unwrap();
        assert_eq!(parsed.name, "my-skill");
        let refused = parse(vec![file("My Skill/SKILL.md", "---\ndescription: d\n---\n")]).unwrap_err();
        assert!(message(refused).contains("not kebab-case"));
    }

    #[test]
    fn refusals_name_their_cause() {
        let cases: Vec<(Vec<UploadedFile>, &str)> = vec![
            (vec![file("pdf/README.md", "x")], "SKILL.md is missing"),
            (vec![file("pdf/SKILL.md", SKILL), file("other/x", "x")], "outside the top-level directory"),
            (vec![file("SKILL.md", SKILL)], "one top-level directory"),
            (vec![file("/pdf/SKILL.md", SKILL)], "absolute"),
            (vec![file("pdf/SKILL.md", SKILL), file("pdf/../x", "x")], "`..`"),
            (vec![file("pdf/SKILL.md", SKILL), file("pdf\\x", "x")], "backslash"),
            (vec![file("pdf/SKILL.md", SKILL), file("pdf//x", "x")], "empty"),
            (vec![file("pdf/SKILL.md", SKILL), file("pdf/SKILL.md", SKILL)], "uploaded twice"),
            (vec![file("pdf/SKILL.md", "---\nname: pdf\n---\n")], "description"),
            (vec![file("pdf/SKILL.md", "---\nname: Bad_Name\ndescription: d\n---\n")], "kebab-case"),
            (vec![], "at least one file"),
        ];
        for (files, expected) in cases {
            let got = message(parse(files).unwrap_err());
            assert!(got.contains(expected), "{got:?} should contain {expected:?}");
        }
        let many: Vec<UploadedFile> = (0..=MAX_FILES).map(|i| file(&format!("pdf/{i}"), "")).collect();
        assert!(message(parse(many).unwrap_err()).contains("at most 1000 files"));
    }

    #[test]
    fn zip_uploads_refuse_symlinks_and_bombs() {
        let build = |entries: &[(&str, Option<&[u8]>)]| {
            let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
            let options = zip::write::SimpleFileOptions::default();
            for (name, content) in entries {
                match content {
                    Some(bytes) => {
                        writer.start_file(*name, options).unwrap();
                        writer.write_all(bytes).unwrap();
                    }
                    None => writer.add_symlink(*name, "/etc/passwd", options).unwrap(),
                }
            }
            Bytes::from(writer.finish().unwrap().into_inner())
        };
        let ok = build(&[("pdf/SKILL.md", Some(SKILL.as_bytes())), ("pdf/a.txt", Some(b"a"))]);
        let parsed = parse(vec![UploadedFile { path: "pdf.zip".into(), bytes: ok }]).unwrap();
        assert_eq!(parsed.files.len(), 2);
        let link = build(&[("pdf/SKILL.md", Some(SKILL.as_bytes())), ("pdf/passwd", None)]);
        let got = message(parse(vec![UploadedFile { path: "pdf.zip".into(), bytes: link }]).unwrap_err());
        assert!(got.contains("symlinks are refused"), "{got}");
        let zeros = vec![0u8; (MAX_UNPACKED_BYTES + 1) as usize];
        let bomb = {
            let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
            let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
            writer.start_file("pdf/SKILL.md", options).unwrap();
            writer.write_all(SKILL.as_bytes()).unwrap();
            writer.start_file("pdf/zeros", options).unwrap();
            writer.write_all(&zeros).unwrap();
            Bytes::from(writer.finish().unwrap().into_inner())
        };
        assert!(bomb.len() < 1_000_000, "deflated zeros are small: {}", bomb.len());
        let got = message(parse(vec![UploadedFile { path: "pdf.zip".into(), bytes: bomb }]).unwrap_err());
        assert!(got.contains("at most 50000000 bytes"), "{got}");
    }

    #[test]
    fn budget_counts_files_and_bytes() {
        let mut budget = UploadBudget::default();
        budget.add_bytes(MAX_UNPACKED_BYTES as usize).unwrap();
        assert!(budget.add_bytes(1).is_err());
        let mut budget = UploadBudget::default();
        for _ in 0..MAX_FILES {
            budget.add_file().unwrap();
        }
        assert!(budget.add_file().is_err());
    }

    #[test]
    fn slugs() {
        for ok in ["a", "pdf-tools", "x1-2y"] {
            assert!(is_slug(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a b", &"a".repeat(65)] {
            assert!(!is_slug(bad), "{bad}");
        }
    }
}
