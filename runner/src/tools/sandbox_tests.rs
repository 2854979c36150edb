//! Tests of [`Sandbox`] through its public API, the way the runner drives it.

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde_json::json;

use super::*;

/// A temporary sandbox root that unmounts the workdir tmpfs mounts under it when dropped
/// (a `TempDir` alone cannot remove a mount point).
pub(super) struct Root(tempfile::TempDir);

impl Root {
    pub(super) fn new() -> Root {
        Root(tempfile::tempdir().unwrap())
    }

    pub(super) fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let below = mounts
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .filter(|m| m.starts_with(&*self.0.path().to_string_lossy()));
        for mount in below.collect::<Vec<_>>() {
            let _ = nix::mount::umount2(mount, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

struct Fixture {
    _root: Root,
    sandbox: Sandbox,
}

impl std::ops::Deref for Fixture {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

impl std::ops::DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut Sandbox {
        &mut self.sandbox
    }
}

pub(super) fn config(root: &Path, limits: Limits) -> SandboxConfig {
    SandboxConfig {
        root: root.to_path_buf(),
        isolation: Isolation::Workdir,
        limits,
        networking: Networking::Unrestricted,
        uids: UidRange::default(),
        environment: SecretEnv::default(),
        mounts: Vec::new(),
        forwarder: None,
        cgroup_limits: Default::default(),
    }
}

pub(super) fn no_network() -> Networking {
    Networking::Limited { allowed_hosts: vec![], allow_package_managers: false }
}

fn sandbox_with(limits: Limits) -> Fixture {
    let root = Root::new();
    let sandbox = Sandbox::open(&config(root.path(), limits), "sess_1").unwrap();
    Fixture { _root: root, sandbox }
}

fn sandbox() -> Fixture {
    sandbox_with(Limits::default())
}

pub(super) async fn bash(sandbox: &mut Sandbox, command: &str) -> ToolOutput {
    sandbox.call("bash", &json!({ "command": command })).await
}

pub(super) fn text(output: &ToolOutput) -> String {
    output.text_content()
}

pub(super) fn assert_ok(output: &ToolOutput) -> String {
    assert!(!output.is_error, "unexpected error: {output:?}");
    text(output)
}

pub(super) fn assert_err(output: &ToolOutput) -> String {
    assert!(output.is_error, "expected an error: {output:?}");
    text(output)
}

/// Pids of live (non-zombie) processes whose command line is exactly `argv`.
pub(super) fn processes_running(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

pub(super) async fn wait_until_gone(argv: &[&str]) -> Vec<u32> {
    for _ in 0..40 {
        if processes_running(argv).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    processes_running(argv)
}

/// The processes running `argv` once at least one is (a job backgrounded with `&` may
/// not have exec'd yet when the shell reports back).
pub(super) async fn wait_until_running(argv: &[&str]) -> Vec<u32> {
    for _ in 0..40 {
        if !processes_running(argv).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    processes_running(argv)
}

pub(super) fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The uid the session runs as: its workdir's owner, from the sandbox range.
pub(super) fn session_uid(s: &Sandbox) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(s.workdir()).unwrap().uid();
    let range = UidRange::default();
    assert!(uid >= range.base && uid < range.base + range.count, "uid {uid} is outside the sandbox range");
    uid
}

// ---- bash ----

#[tokio::test]
async fn bash_keeps_cwd_and_environment_between_calls() {
    let mut s = sandbox();
    let workdir = s.workdir().to_path_buf();
    assert_ok(&bash(&mut s, "mkdir -p sub && cd sub").await);
    assert_eq!(assert_ok(&bash(&mut s, "pwd").await), workdir.join("sub").display().to_string());
    assert_ok(&bash(&mut s, "export GREETING='hello world'").await);
    assert_eq!(assert_ok(&bash(&mut s, "echo \"$GREETING\"").await), "hello world");
    s.close().await;
}

#[tokio::test]
async fn bash_starts_with_a_scrubbed_environment() {
    let mut s = sandbox();
    let out = assert_ok(&bash(&mut s, "env | sort").await);
    let names: Vec<&str> = out.lines().filter_map(|l| l.split('=').next()).collect();
    for leaked in ["CARGO", "RUST_TEST_THREADS", "USER"] {
        assert!(!names.contains(&leaked), "{leaked} leaked into {out}");
    }
    assert!(out.contains(&format!("HOME={}", s.workdir().display())), "{out}");
    assert!(out.contains("PATH=/usr/local/bin:/usr/bin:/bin"), "{out}");
    assert_eq!(assert_ok(&bash(&mut s, "pwd").await), s.workdir().display().to_string());
    s.close().await;
}

#[tokio::test]
async fn bash_restart_forgets_state() {
    let mut s = sandbox();
    assert_ok(&bash(&mut s, "export MARK=1").await);
    let out = s.call("bash", &json!({"restart": true})).await;
    assert_eq!(out, ToolOutput::text("bash session restarted"));
    assert_eq!(assert_ok(&bash(&mut s, "echo ${MARK:-unset}").await), "unset");
    s.close().await;
}

#[tokio::test]
async fn bash_timeout_kills_the_command_and_the_shell_recovers() {
    let mut s = sandbox();
    assert_ok(&bash(&mut s, "export BEFORE=1").await);
    let out = s.call("bash", &json!({"command": "sleep 5.321", "timeout_ms": 300})).await;
    assert_eq!(assert_err(&out), "tool 'bash' timed out after 300 ms");
    assert_eq!(wait_until_gone(&["sleep", "5.321"]).await, Vec::<u32>::new());
    // A fresh shell: works, and the old state is gone.
    assert_eq!(assert_ok(&bash(&mut s, "echo ok ${BEFORE:-fresh}").await), "ok fresh");
    s.close().await;
}

#[tokio::test]
async fn bash_timeout_is_capped() {
    let mut s = sandbox();
    let out = s.call("bash", &json!({"command": "echo fine", "timeout_ms": 10_000_000})).await;
    assert_eq!(assert_ok(&out), "fine");
    let out = s.call("bash", &json!({"command": "echo fine", "timeout_ms": 0})).await;
    assert!(assert_err(&out).contains("timeout_ms"));
    s.close().await;
}

#[tokio::test]
async fn bash_output_is_capped_keeping_the_head() {
    let mut s = sandbox();
    let out = assert_ok(&bash(&mut s, "printf 'start'; head -c 300000 /dev/zero | tr '\\0' a").await);
    assert!(out.starts_with("startaaa"));
    assert!(
        out.contains("[output truncated: showing the first 102400 of 300005 bytes]"),
        "{}",
        &out[out.len() - 200..]
    );
    assert!(out.len() < 102400 + 200);
    // The shell is still in sync afterwards.
    assert_eq!(assert_ok(&bash(&mut s, "echo next").await), "next");
    s.close().await;
}

#[tokio::test]
async fn bash_reports_exit_codes_and_merges_stderr() {
    let mut s = sandbox();
    assert_eq!(assert_ok(&bash(&mut s, "false").await), "(no output)\nexit code: 1");
    assert_eq!(assert_ok(&bash(&mut s, "echo out; echo err >&2; (exit 7)").await), "out\nerr\nexit code: 7");
    assert_eq!(assert_ok(&bash(&mut s, "true").await), "(no output)");
    s.close().await;
}

#[tokio::test]
async fn bash_survives_malformed_commands_and_stdin_readers() {
    let mut s = sandbox();
    let out = assert_ok(&bash(&mut s, "echo \"unterminated").await);
    assert!(out.contains("exit code: 2"), "{out}");
    // `cat` must not eat the protocol stream.
    assert_eq!(assert_ok(&bash(&mut s, "cat; echo after").await), "after");
    assert_eq!(assert_ok(&bash(&mut s, "echo 'it'\\''s'").await), "it's");
    s.close().await;
}

#[tokio::test]
async fn bash_exit_ends_the_session_and_the_next_call_starts_another() {
    let mut s = sandbox();
    let out = assert_ok(&bash(&mut s, "echo bye; exit 4").await);
    assert!(out.starts_with("bye\nexit code: 4\n"), "{out}");
    assert!(out.contains("session ended"), "{out}");
    assert_eq!(assert_ok(&bash(&mut s, "echo again").await), "again");
    s.close().await;
}

#[tokio::test]
async fn bash_input_errors_are_tool_errors() {
    let mut s = sandbox();
    assert!(assert_err(&s.call("bash", &json!({})).await).contains("`command` is required"));
    assert!(assert_err(&s.call("bash", &json!({"command": 5})).await).contains("invalid input for tool 'bash'"));
    assert!(assert_err(&s.call("bash", &json!("ls")).await).contains("expected a JSON object"));
}

#[tokio::test]
async fn bash_runs_unprivileged_when_the_runner_is_root() {
    if !running_as_root() {
        return;
    }
    let mut s = sandbox();
    let uid = session_uid(&s);
    assert_eq!(assert_ok(&bash(&mut s, "id -u; id -g").await), format!("{uid}\n{uid}"));
    let status = assert_ok(&bash(&mut s, "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status").await);
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
    assert!(status.contains("CapBnd:\t0000000000000000"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert_ok(&bash(&mut s, "touch made_by_shell").await);
    let out = assert_err(&bash(&mut s, "touch /etc/agentd_sandbox_probe").await.with_error_if_exit());
    assert!(out.contains("Permission denied"), "{out}");
    s.close().await;
}

/// Test helper: treat a non-zero exit as an error so the root test above can assert on it.
trait ExitAsError {
    fn with_error_if_exit(self) -> ToolOutput;
}

impl ExitAsError for ToolOutput {
    fn with_error_if_exit(mut self) -> ToolOutput {
        self.is_error = self.is_error || self.text_content().contains("exit code:");
        self
    }
}

#[tokio::test]
async fn bash_file_size_limit_stops_big_writes() {
    let limit = 1024 * 1024;
    let mut s = sandbox_with(Limits { file_size_bytes: limit, ..Limits::default() });
    let out = bash(&mut s, "head -c 3000000 /dev/zero > big").await;
    assert!(!out.is_error && text(&out).contains("exit code:"), "{out:?}");
    let size = std::fs::metadata(s.workdir().join("big")).unwrap().len();
    assert!(size <= limit, "file grew to {size} bytes, over the {limit}-byte limit");
    assert_eq!(assert_ok(&bash(&mut s, "ulimit -f").await), "1024");
    s.close().await;
}

#[tokio::test]
async fn bash_limits_are_hard_and_cannot_be_raised() {
    let mut s = sandbox();
    let out = bash(&mut s, "ulimit -t unlimited").await;
    assert!(text(&out).contains("exit code: 1"), "{out:?}");
    assert_eq!(assert_ok(&bash(&mut s, "ulimit -t; ulimit -u; ulimit -v").await), "300\n256\n2097152");
    s.close().await;
}

#[tokio::test]
async fn bash_fork_bomb_is_contained_by_the_process_limit() {
    let mut s = sandbox_with(Limits { processes: 32, ..Limits::default() });
    let out = s
        .call(
            "bash",
            // Without the limit this returns "spawned" at once; with it bash's forks fail and
            // it backs off and retries until the timeout.
            &json!({"command": "for i in $(seq 1 200); do sleep 5.777 & done; echo spawned", "timeout_ms": 1500}),
        )
        .await;
    let body = text(&out);
    assert!(
        out.is_error || body.contains("Resource temporarily unavailable") || body.contains("fork:"),
        "fork bomb was not contained: {out:?}"
    );
    // Nothing it started survives, and the sandbox keeps working (builtins need no fork).
    assert_eq!(wait_until_gone(&["sleep", "5.777"]).await, Vec::<u32>::new());
    assert_eq!(assert_ok(&bash(&mut s, "echo still here").await), "still here");
    s.close().await;
}

#[tokio::test]
async fn close_and_drop_kill_background_jobs() {
    let mut s = sandbox();
    assert_ok(&bash(&mut s, "sleep 6.111 &").await);
    assert_eq!(wait_until_running(&["sleep", "6.111"]).await.len(), 1);
    s.close().await;
    assert_eq!(wait_until_gone(&["sleep", "6.111"]).await, Vec::<u32>::new());

    let mut s = sandbox();
    assert_ok(&bash(&mut s, "sleep 6.222 &").await);
    assert_eq!(wait_until_running(&["sleep", "6.222"]).await.len(), 1);
    drop(s);
    assert_eq!(wait_until_gone(&["sleep", "6.222"]).await, Vec::<u32>::new());
}

// ---- files ----

#[tokio::test]
async fn write_then_read_with_view_range() {
    let mut s = sandbox();
    let content = "one\ntwo\nthree\nfour\n";
    let out = s.call("write", &json!({"file_path": "dir/notes.txt", "content": content})).await;
    assert_eq!(out, ToolOutput::text("wrote 19 bytes to dir/notes.txt"));
    assert_eq!(std::fs::read_to_string(s.workdir().join("dir/notes.txt")).unwrap(), content);

    let all = assert_ok(&s.call("read", &json!({"file_path": "dir/notes.txt"})).await);
    assert_eq!(all, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n");
    let some = assert_ok(&s.call("read", &json!({"file_path": "dir/notes.txt", "view_range": [2, 3]})).await);
    assert_eq!(some, "     2\ttwo\n     3\tthree\n");
    let absolute = s.workdir().join("dir/notes.txt").display().to_string();
    let tail = assert_ok(&s.call("read", &json!({"file_path": absolute, "view_range": [3, -1]})).await);
    assert_eq!(tail, "     3\tthree\n     4\tfour\n");
    let past = assert_err(&s.call("read", &json!({"file_path": "dir/notes.txt", "view_range": [9, 0]})).await);
    assert!(past.contains("past the end"), "{past}");
    assert!(
        assert_err(&s.call("read", &json!({"file_path": "dir/notes.txt", "view_range": [3, 2]})).await)
            .contains("invalid view_range")
    );
    assert!(assert_err(&s.call("read", &json!({"file_path": "missing.txt"})).await).contains("no such file"));
    assert!(assert_err(&s.call("read", &json!({"file_path": "dir"})).await).contains("is a directory"));
}

#[tokio::test]
async fn written_files_belong_to_the_sandbox_user() {
    if !running_as_root() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let mut s = sandbox();
    let uid = session_uid(&s);
    assert_ok(&s.call("write", &json!({"file_path": "a/b/c.txt", "content": "x"})).await);
    for path in ["a", "a/b", "a/b/c.txt", ""] {
        let meta = std::fs::metadata(s.workdir().join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (uid, uid), "{path}");
    }
    // The shell (as the sandbox user) can modify what `write` created.
    assert_eq!(assert_ok(&bash(&mut s, "echo y >> a/b/c.txt && cat a/b/c.txt").await), "xy");
    s.close().await;
}

#[tokio::test]
async fn read_long_lines_and_binary_files() {
    let mut s = sandbox();
    std::fs::write(s.workdir().join("long.txt"), format!("{}\nshort\n", "z".repeat(5000))).unwrap();
    let out = assert_ok(&s.call("read", &json!({"file_path": "long.txt"})).await);
    assert!(out.contains(&format!("     1\t{} [line truncated]\n", "z".repeat(2000))), "{}", &out[..50]);
    assert!(out.ends_with("     2\tshort\n"));
    std::fs::write(s.workdir().join("blob.bin"), [1u8, 0, 2, 3]).unwrap();
    assert!(assert_err(&s.call("read", &json!({"file_path": "blob.bin"})).await).contains("binary"));
    std::fs::write(s.workdir().join("empty.txt"), "").unwrap();
    assert_eq!(assert_ok(&s.call("read", &json!({"file_path": "empty.txt"})).await), "(empty file)");
}

#[tokio::test]
async fn read_caps_total_text() {
    let mut s = sandbox();
    let line = "y".repeat(1000);
    std::fs::write(s.workdir().join("big.txt"), format!("{line}\n").repeat(1000)).unwrap();
    let out = assert_ok(&s.call("read", &json!({"file_path": "big.txt"})).await);
    assert!(out.len() <= 256 * 1024 + 200, "{}", out.len());
    assert!(out.contains("[output truncated at 262144 bytes"), "{}", &out[out.len() - 100..]);
}

#[tokio::test]
async fn read_images_and_pdfs_as_blocks() {
    let mut s = sandbox();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-not-really";
    std::fs::write(s.workdir().join("pic.PNG"), png).unwrap();
    let out = s.call("read", &json!({"file_path": "pic.PNG"})).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.content.len(), 1);
    let block = &out.content[0];
    assert_eq!(block["type"], "image");
    assert_eq!(block["source"]["type"], "base64");
    assert_eq!(block["source"]["media_type"], "image/png");
    let data = base64::engine::general_purpose::STANDARD.decode(block["source"]["data"].as_str().unwrap()).unwrap();
    assert_eq!(data, png);

    std::fs::write(s.workdir().join("doc.pdf"), b"%PDF-1.4\n%%EOF\n").unwrap();
    let out = s.call("read", &json!({"file_path": "doc.pdf"})).await;
    assert_eq!(out.content[0]["type"], "document");
    assert_eq!(out.content[0]["source"]["media_type"], "application/pdf");

    let big = std::fs::File::create(s.workdir().join("huge.jpg")).unwrap();
    big.set_len(5 * 1024 * 1024 + 1).unwrap();
    assert!(assert_err(&s.call("read", &json!({"file_path": "huge.jpg"})).await).contains("larger than"));
}

#[tokio::test]
async fn edit_requires_a_unique_match_unless_replace_all() {
    let mut s = sandbox();
    std::fs::write(s.workdir().join("f.txt"), "alpha beta\nbeta gamma\n").unwrap();
    let once = s.call("edit", &json!({"file_path": "f.txt", "old_string": "alpha", "new_string": "ALPHA"})).await;
    assert_eq!(once, ToolOutput::text("edited f.txt: 1 replacement(s)"));

    let ambiguous = s.call("edit", &json!({"file_path": "f.txt", "old_string": "beta", "new_string": "B"})).await;
    let message = assert_err(&ambiguous);
    assert!(message.contains("occurs 2 times") && message.contains("replace_all"), "{message}");
    assert_eq!(std::fs::read_to_string(s.workdir().join("f.txt")).unwrap(), "ALPHA beta\nbeta gamma\n");

    let missing = s.call("edit", &json!({"file_path": "f.txt", "old_string": "delta", "new_string": "D"})).await;
    assert!(assert_err(&missing).contains("old_string not found"));

    let all = s
        .call("edit", &json!({"file_path": "f.txt", "old_string": "beta", "new_string": "B", "replace_all": true}))
        .await;
    assert_eq!(all, ToolOutput::text("edited f.txt: 2 replacement(s)"));
    assert_eq!(std::fs::read_to_string(s.workdir().join("f.txt")).unwrap(), "ALPHA B\nB gamma\n");
}

#[tokio::test]
async fn write_and_edit_respect_the_file_size_limit() {
    let mut s = sandbox_with(Limits { file_size_bytes: 100, ..Limits::default() });
    let out = s.call("write", &json!({"file_path": "big.txt", "content": "x".repeat(101)})).await;
    assert!(assert_err(&out).contains("file size limit of 100 bytes"));
    assert!(!s.workdir().join("big.txt").exists());
    assert_ok(&s.call("write", &json!({"file_path": "ok.txt", "content": "x".repeat(60)})).await);
    let out = s
        .call("edit", &json!({"file_path": "ok.txt", "old_string": "x", "new_string": "yy", "replace_all": true}))
        .await;
    assert!(assert_err(&out).contains("file size limit of 100 bytes"));
    assert_eq!(std::fs::read_to_string(s.workdir().join("ok.txt")).unwrap(), "x".repeat(60));
}

// ---- glob and grep ----

fn touch_with_mtime(path: &Path, seconds_after_epoch: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds_after_epoch)).unwrap();
}

#[tokio::test]
async fn glob_lists_newest_first() {
    let mut s = sandbox();
    let w = s.workdir().to_path_buf();
    touch_with_mtime(&w.join("old.rs"), 1_000);
    touch_with_mtime(&w.join("src/new.rs"), 3_000);
    touch_with_mtime(&w.join("src/deep/mid.rs"), 2_000);
    touch_with_mtime(&w.join("notes.txt"), 4_000);
    let out = assert_ok(&s.call("glob", &json!({"pattern": "**/*.rs"})).await);
    assert_eq!(out, "src/new.rs\nsrc/deep/mid.rs\nold.rs");
    let out = assert_ok(&s.call("glob", &json!({"pattern": "*.rs"})).await);
    assert_eq!(out, "old.rs");
    let out = assert_ok(&s.call("glob", &json!({"pattern": "**/*.rs", "path": "src/deep"})).await);
    assert_eq!(out, "src/deep/mid.rs");
    assert_eq!(assert_ok(&s.call("glob", &json!({"pattern": "*.go"})).await), "(no matches)");
    assert!(assert_err(&s.call("glob", &json!({"pattern": "*", "path": "../"})).await).contains("escapes"));
}

#[tokio::test]
async fn glob_caps_results_at_200() {
    let mut s = sandbox();
    let w = s.workdir().to_path_buf();
    for i in 0..205u64 {
        touch_with_mtime(&w.join(format!("f{i:03}.txt")), 10_000 + i);
    }
    let out = s.call("glob", &json!({"pattern": "*.txt"})).await;
    let lines: Vec<String> = out.content[0]["text"].as_str().unwrap().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 200);
    assert_eq!(lines[0], "f204.txt");
    assert_eq!(lines[199], "f005.txt");
    assert!(text(&out).contains("200 newest of 205"), "{out:?}");
}

#[tokio::test]
async fn grep_finds_lines_and_skips_binary_files() {
    let mut s = sandbox();
    let w = s.workdir().to_path_buf();
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::write(w.join("src/a.rs"), "fn main() {}\nlet x = 1;\nfn helper() {}\n").unwrap();
    std::fs::write(w.join("b.txt"), "nothing here\n").unwrap();
    std::fs::write(w.join("c.bin"), b"fn binary\0\n").unwrap();
    let out = assert_ok(&s.call("grep", &json!({"pattern": r"fn \w+\("})).await);
    assert_eq!(out, "src/a.rs:1:fn main() {}\nsrc/a.rs:3:fn helper() {}\n");
    let out = assert_ok(&s.call("grep", &json!({"pattern": "x = ", "path": "src/a.rs"})).await);
    assert_eq!(out, "src/a.rs:2:let x = 1;\n");
    assert_eq!(assert_ok(&s.call("grep", &json!({"pattern": "absent"})).await), "(no matches)");
    assert!(assert_err(&s.call("grep", &json!({"pattern": "("})).await).contains("invalid regex"));
}

#[tokio::test]
async fn grep_output_is_capped() {
    let mut s = sandbox();
    std::fs::write(s.workdir().join("many.txt"), "match this line\n".repeat(20_000)).unwrap();
    let out = assert_ok(&s.call("grep", &json!({"pattern": "match"})).await);
    assert!(out.len() <= 100 * 1024 + 200);
    assert!(out.contains("[output truncated at 102400 bytes"));
}

// ---- confinement ----

#[tokio::test]
async fn paths_outside_the_workdir_are_refused() {
    let mut s = sandbox();
    std::os::unix::fs::symlink("/etc", s.workdir().join("link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", s.workdir().join("f")).unwrap();
    std::fs::write(s.workdir().join("inside.txt"), "safe\n").unwrap();
    std::os::unix::fs::symlink("inside.txt", s.workdir().join("good_link")).unwrap();

    let cases = [
        ("read", json!({"file_path": "../x"}), "path escapes the session workdir: ../x"),
        ("read", json!({"file_path": "/etc/passwd"}), "path escapes the session workdir: /etc/passwd"),
        ("read", json!({"file_path": "link/passwd"}), "through a symlink"),
        ("read", json!({"file_path": "f"}), "through a symlink"),
        ("write", json!({"file_path": "../x", "content": "x"}), "path escapes the session workdir: ../x"),
        ("write", json!({"file_path": "/tmp/agentd_escape", "content": "x"}), "path escapes"),
        ("write", json!({"file_path": "link/x", "content": "x"}), "through a symlink"),
        ("write", json!({"file_path": "f", "content": "x"}), "through a symlink"),
        ("write", json!({"file_path": "good_link", "content": "x"}), "refusing to write through a symlink"),
        ("edit", json!({"file_path": "f", "old_string": "root", "new_string": "x"}), "through a symlink"),
        ("glob", json!({"pattern": "*", "path": "link"}), "through a symlink"),
        ("grep", json!({"pattern": "root", "path": "link"}), "through a symlink"),
        ("grep", json!({"pattern": "root", "path": "/etc"}), "path escapes"),
    ];
    for (tool, input, expected) in cases {
        let out = s.call(tool, &input).await;
        let message = assert_err(&out);
        assert!(message.contains(expected), "{tool} {input}: {message}");
    }
    assert!(!s.workdir().join("../x").exists());
    assert!(!Path::new("/etc/x").exists());
    assert!(!Path::new("/tmp/agentd_escape").exists());

    // Links that stay inside work for reading; whole-tree searches do not follow links out.
    assert_eq!(assert_ok(&s.call("read", &json!({"file_path": "good_link"})).await), "     1\tsafe\n");
    assert_eq!(assert_ok(&s.call("grep", &json!({"pattern": "^root:"})).await), "(no matches)");
    let listing = assert_ok(&s.call("glob", &json!({"pattern": "**/*"})).await);
    assert!(!listing.contains("passwd") && !listing.lines().any(|l| l == "f"), "{listing}");
}

#[tokio::test]
async fn hard_links_to_host_files_are_refused_when_root() {
    if !running_as_root() {
        return;
    }
    // A root-owned file on the same filesystem, linked in as a hostile shell might have done.
    // (With a disk quota the workdir is a tmpfs of its own, where no host file can be
    // hard-linked at all; without one it shares the root's filesystem.)
    let mut s = sandbox_with(Limits { disk_bytes: 0, ..Limits::default() });
    let host = s.workdir().parent().unwrap().join("host_secret");
    std::fs::write(&host, "secret\n").unwrap();
    std::fs::hard_link(&host, s.workdir().join("stolen")).unwrap();
    for (tool, input) in [
        ("read", json!({"file_path": "stolen"})),
        ("write", json!({"file_path": "stolen", "content": "x"})),
        ("edit", json!({"file_path": "stolen", "old_string": "secret", "new_string": "x"})),
    ] {
        let message = assert_err(&s.call(tool, &input).await);
        assert!(message.contains("hard link"), "{tool}: {message}");
    }
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "secret\n");
}

#[tokio::test]
async fn symlinked_parent_directory_out_is_refused_for_new_files() {
    let mut s = sandbox();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), s.workdir().join("out")).unwrap();
    let out = s.call("write", &json!({"file_path": "out/new/deep.txt", "content": "x"})).await;
    assert!(assert_err(&out).contains("through a symlink"));
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

// ---- dispatch and configuration ----

#[tokio::test]
async fn unknown_tools_and_malformed_inputs_are_errors() {
    let mut s = sandbox();
    let out = s.call("browse", &json!({})).await;
    assert!(assert_err(&out).contains("unknown tool \"browse\""));
    for tool in ["read", "write", "edit", "glob", "grep"] {
        let out = s.call(tool, &json!({"nonsense": true})).await;
        assert!(assert_err(&out).contains(&format!("invalid input for tool '{tool}'")), "{out:?}");
        let out = s.call(tool, &json!(null)).await;
        assert!(out.is_error);
    }
}

#[test]
fn namespace_isolation_without_bwrap_is_unavailable() {
    if super::find_program("bwrap", true).is_some() {
        return;
    }
    let root = Root::new();
    let cfg = SandboxConfig { isolation: Isolation::Namespace, ..config(root.path(), Limits::default()) };
    match Sandbox::open(&cfg, "s1") {
        Err(SandboxError::Unavailable(message)) => {
            assert!(message.starts_with("namespace isolation needs bubblewrap (bwrap)"), "{message}");
            assert!(message.contains("apt-get install bubblewrap"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(!root.path().join("s1").exists());
}

#[test]
fn limited_networking_without_root_needs_namespace_isolation() {
    if running_as_root() {
        return;
    }
    let root = Root::new();
    let cfg = SandboxConfig { networking: no_network(), ..config(root.path(), Limits::default()) };
    match Sandbox::open(&cfg, "s1") {
        Err(SandboxError::Unavailable(message)) => assert!(message.contains("needs namespace isolation")),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn session_ids_are_validated_and_workdirs_reopened() {
    let root = Root::new();
    let cfg = config(root.path(), Limits::default());
    for bad in ["", "../x", "a/b", "a b", ".", "x\0"] {
        match Sandbox::open(&cfg, bad) {
            Err(SandboxError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}"),
            other => panic!("{bad:?}: expected InvalidInput, got {other:?}"),
        }
    }
    let first = Sandbox::open(&cfg, "Sess-1_a").unwrap();
    std::fs::write(first.workdir().join("kept"), "x").unwrap();
    let again = Sandbox::open(&cfg, "Sess-1_a").unwrap();
    assert_eq!(again.workdir(), first.workdir());
    assert!(again.workdir().join("kept").exists());
    assert_eq!(again.workdir(), std::fs::canonicalize(root.path().join("Sess-1_a")).unwrap());
}

#[tokio::test]
async fn sandbox_and_its_calls_can_move_between_tasks() {
    fn require_send<T: Send>(_: &T) {}
    let mut s = sandbox();
    require_send(&s.sandbox);
    let input = json!({"command": "true"});
    let call = s.call("bash", &input);
    require_send(&call);
    drop(call);
    let handle = tokio::spawn(async move {
        let out = s.call("bash", &json!({"command": "echo moved"})).await;
        s.close().await;
        out
    });
    assert_eq!(handle.await.unwrap(), ToolOutput::text("moved"));
}

#[test]
fn isolation_parses_from_config_strings() {
    assert_eq!("workdir".parse::<Isolation>(), Ok(Isolation::Workdir));
    assert_eq!("namespace".parse::<Isolation>(), Ok(Isolation::Namespace));
    assert!("vm".parse::<Isolation>().is_err());
}

#[test]
fn namespace_launch_wraps_setpriv_in_bwrap() {
    let plan = super::LaunchPlan {
        bash: "/usr/bin/bash".into(),
        setpriv: Some("/usr/bin/setpriv".into()),
        bwrap: Some(("/usr/bin/bwrap".into(), true)),
        unshare: None,
        egress: None,
    };
    let env = SecretEnv(vec![("TOKEN".into(), "s3cr3t".into()), ("PATH".into(), "/evil".into())]);
    let mount = |path: &str, writable| crate::mounts::MountAccess { path: path.into(), writable };
    let mounts = vec![mount("/mnt/memory/notes", true), mount("/mnt/memory/style", false)];
    let cfg = SandboxConfig { environment: env, mounts, ..config(Path::new("/srv/work"), Limits::default()) };
    let launch = plan.into_launch(Path::new("/srv/work/s1"), &cfg, Some((1000, 1001)), None);
    assert_eq!(launch.program, Path::new("/usr/bin/bwrap"));
    let args: Vec<String> = launch.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let joined = args.join(" ");
    assert!(joined.contains("--unshare-pid") && joined.contains("--unshare-net"), "{joined}");
    assert!(joined.contains("--bind /srv/work/s1 /srv/work/s1 --bind-try /srv/work/s1/mnt /mnt"), "{joined}");
    // The session's mounts: /mnt from the workdir, uploads, skills and read-only memory
    // stores read-only on top (a read-write store is part of /mnt's bind).
    assert!(
        joined.contains(
            "--ro-bind-try /srv/work/s1/mnt/session/uploads /mnt/session/uploads \
             --ro-bind-try /srv/work/s1/mnt/skills /mnt/skills \
             --ro-bind-try /srv/work/s1/mnt/memory/style /mnt/memory/style --chdir /srv/work/s1 --"
        ),
        "{joined}"
    );
    assert!(!joined.contains("memory/notes"), "{joined}");
    assert!(joined.ends_with(
        "-- /usr/bin/setpriv --pdeathsig=KILL --reuid=1000 --regid=1001 --clear-groups --inh-caps=-all \
         --bounding-set=-all --no-new-privs -- /usr/bin/bash --noprofile --norc"
    ));
    assert!(joined.contains("--perms 1777 --size 1073741824 --tmpfs /tmp"), "{joined}");
    assert_eq!(launch.setup, format!("{} && umask 077", ulimit_script(&Limits::default())));
    // Credentials reach the shell's environment, never the command line or Debug output;
    // names the sandbox sets itself are not replaced.
    assert_eq!(launch.env.0, vec![("TOKEN".to_owned(), "s3cr3t".to_owned())]);
    assert!(!joined.contains("s3cr3t") && !format!("{launch:?}").contains("s3cr3t"), "{launch:?}");

    let open_net = super::LaunchPlan {
        bash: "/bin/bash".into(),
        setpriv: None,
        bwrap: Some(("bwrap".into(), false)),
        unshare: None,
        egress: None,
    };
    let launch = open_net.into_launch(Path::new("/w"), &config(Path::new("/"), Limits::default()), None, None);
    assert!(!launch.args.iter().any(|a| a == "--unshare-net"));
}

#[test]
fn workdir_launch_as_root_wraps_the_shell_in_pid_and_mount_namespaces() {
    let plan = super::LaunchPlan {
        bash: "/usr/bin/bash".into(),
        setpriv: Some("/usr/bin/setpriv".into()),
        bwrap: None,
        unshare: Some(("/usr/bin/unshare".into(), "/bin/sh".into(), true)),
        egress: None,
    };
    let launch = plan.into_launch(Path::new("/w"), &config(Path::new("/"), Limits::default()), Some((7, 7)), None);
    assert_eq!(launch.program, Path::new("/usr/bin/setpriv"));
    let joined = launch.args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
    assert!(
        joined.starts_with(
            "--pdeathsig KILL -- /usr/bin/unshare --pid --fork --kill-child --mount --propagation private --net -- \
             /bin/sh -c "
        ),
        "{joined}"
    );
    assert!(joined.contains("mount -t tmpfs -o size=1073741824,mode=1777,nosuid,nodev"), "{joined}");
    assert!(joined.ends_with("--no-new-privs -- /usr/bin/bash --noprofile --norc"), "{joined}");
}

#[test]
fn ulimit_script_uses_bash_units() {
    let script = ulimit_script(&Limits::default());
    assert_eq!(script, "ulimit -c 0 -t 300 -v 2097152 -u 256 -f 65536 2>&1");
    let unlimited =
        ulimit_script(&Limits { cpu_seconds: 0, memory_bytes: 0, processes: 0, file_size_bytes: 0, disk_bytes: 0 });
    assert_eq!(unlimited, "ulimit -c 0 -t unlimited -v unlimited -u unlimited -f unlimited 2>&1");
}

#[test]
fn the_probe_names_what_namespace_isolation_lacks() {
    let all = CAP_SYS_ADMIN | CAP_NET_ADMIN;
    assert!(missing_for_namespaces(false, all).starts_with("missing: root"));
    let none = missing_for_namespaces(true, 0);
    assert!(none.contains("CAP_SYS_ADMIN") && none.contains("CAP_NET_ADMIN"), "{none}");
    let net = missing_for_namespaces(true, CAP_SYS_ADMIN);
    assert!(net.contains("CAP_NET_ADMIN") && !net.contains("CAP_SYS_ADMIN"), "{net}");
    assert!(missing_for_namespaces(true, all).contains("seccomp"));
}
