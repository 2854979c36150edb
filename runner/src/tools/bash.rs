//! `bash`: one persistent shell per sandbox.
//!
//! Commands are written to the shell's stdin wrapped as
//! `{ builtin eval '<command>'; } </dev/null 2>&1` followed by a `printf` of a fresh random
//! marker and `$?`, and the call completes when that marker line appears on stdout. `eval` of
//! a single-quoted string keeps a malformed command (an unclosed quote, say) from swallowing
//! the marker, and `</dev/null` keeps commands from reading the protocol stream itself. The
//! shell runs in its own process group, and (when the runner is root, or under bubblewrap)
//! in its own pid namespace: killing the group kills the namespace's first process, and with
//! it every process the session started, including those that left the group (`setsid`).

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

use super::{ToolOutput, parse_input};

/// `timeout_ms` when the model gives none.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest `timeout_ms` honoured; larger values are cut to this.
pub(crate) const MAX_TIMEOUT_MS: u64 = 600_000;
/// Cap on the output returned for one command; the head is kept.
pub(crate) const MAX_OUTPUT_BYTES: usize = 100 * 1024;
/// `PATH` inside the sandbox shell.
pub(crate) const SHELL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Bytes kept past the output cap while waiting for the marker.
const MARKER_WINDOW: usize = 4096;
/// Bytes of the shell's own stderr kept to explain a failed start.
const STDERR_TAIL: usize = 4096;

/// Extra variables of the sandbox shell (a session's vault `environment_variable`
/// credentials). Their values never appear in `Debug` output.
#[derive(Clone, Default)]
pub struct SecretEnv(pub Vec<(String, String)>);

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(name, _)| name)).finish()
    }
}

/// How to start the sandbox shell; built by [`crate::sandbox::Sandbox::open`].
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// The program to exec: bash itself, or a wrapper (`setpriv`, `bwrap`) that ends in bash.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Working directory and `HOME`.
    pub workdir: PathBuf,
    /// Script run before the first command, e.g. `ulimit`; must exit 0.
    pub setup: String,
    /// Variables added to the scrubbed environment (vault credentials); never logged.
    pub env: SecretEnv,
}

impl Launch {
    /// Starts the launch through `sh`, which first writes its own pid into each of
    /// `procs_files` (the session's cgroups), so every process of the session is in them.
    pub(crate) fn join_cgroup(&mut self, procs_files: &[PathBuf]) {
        let mut args: Vec<OsString> = vec!["-c".into(), crate::sandbox::cgroup::JOIN_SCRIPT.into(), "sh".into()];
        args.extend(procs_files.iter().map(|file| file.clone().into_os_string()));
        args.push("--".into());
        args.push(std::mem::replace(&mut self.program, PathBuf::from("/bin/sh")).into_os_string());
        args.append(&mut self.args);
        self.args = args;
    }
}

#[derive(Deserialize)]
struct BashInput {
    command: Option<String>,
    restart: Option<bool>,
    timeout_ms: Option<u64>,
}

/// Runs one `bash` tool call against the persistent shell in `slot`, starting it if needed.
pub(crate) async fn call(slot: &mut Option<Shell>, launch: &Launch, input: &Value) -> ToolOutput {
    let input: BashInput = match parse_input("bash", input) {
        Ok(input) => input,
        Err(output) => return output,
    };
    if input.restart == Some(true) {
        if let Some(shell) = slot.take() {
            shell.kill().await;
        }
        return match Shell::start(launch).await {
            Ok(shell) => {
                *slot = Some(shell);
                ToolOutput::text("bash session restarted")
            }
            Err(message) => ToolOutput::error(message),
        };
    }
    let Some(command) = input.command else {
        return ToolOutput::error("invalid input for tool 'bash': `command` is required unless `restart` is true");
    };
    if command.contains('\0') {
        return ToolOutput::error("invalid input for tool 'bash': `command` contains a NUL byte");
    }
    let timeout_ms = match input.timeout_ms {
        None => DEFAULT_TIMEOUT_MS,
        Some(0) => return ToolOutput::error("invalid input for tool 'bash': `timeout_ms` must be positive"),
        Some(ms) => ms.min(MAX_TIMEOUT_MS),
    };

    // A call whose future was dropped mid-command leaves the shell in an unknown state.
    if let Some(shell) = slot.take_if(|shell| shell.busy) {
        shell.kill().await;
    }
    let shell = match slot {
        Some(shell) => shell,
        None => match Shell::start(launch).await {
            Ok(shell) => slot.insert(shell),
            Err(message) => return ToolOutput::error(message),
        },
    };
    let script = format!("{{ builtin eval {}\n}} </dev/null 2>&1", single_quote(&command));
    match shell.run(&script, Duration::from_millis(timeout_ms)).await {
        Outcome::Done { output, code } => ToolOutput::text(render(&output, code)),
        Outcome::TimedOut => {
            if let Some(shell) = slot.take() {
                shell.kill().await;
            }
            // A failed restart is retried by the next call, which reports it.
            *slot = Shell::start(launch).await.ok();
            ToolOutput::error(format!("tool 'bash' timed out after {timeout_ms} ms"))
        }
        Outcome::Exited { output, status } => {
            if let Some(shell) = slot.take() {
                shell.kill().await;
            }
            exited(&output, status)
        }
        Outcome::Failed(e) => {
            if let Some(shell) = slot.take() {
                shell.kill().await;
            }
            ToolOutput::error(format!("the bash session failed: {e}; the next call starts a new session"))
        }
    }
}

/// What became of one command.
enum Outcome {
    /// The marker arrived: the command finished with `code`.
    Done {
        output: Captured,
        code: i32,
    },
    /// The shell itself ended (e.g. `exit`, or killed by a resource limit).
    Exited {
        output: Captured,
        status: Option<ExitStatus>,
    },
    TimedOut,
    Failed(io::Error),
}

/// Output of one command: the first bytes, and how many there were in all.
struct Captured {
    head: Vec<u8>,
    total: u64,
}

/// The persistent sandbox shell.
pub(crate) struct Shell {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    pgid: Pid,
    /// Bytes read past the last marker (output of background jobs), shown with the next call.
    carry: Vec<u8>,
    /// Set while a command is in flight; still set if its call was abandoned.
    busy: bool,
    /// The leader has been waited for, so its pid may be reused: the group is not signalled again.
    reaped: bool,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
}

impl Shell {
    /// Spawns the shell and runs `launch.setup` in it.
    pub(crate) async fn start(launch: &Launch) -> Result<Shell, String> {
        let mut command = Command::new(&launch.program);
        command
            .args(&launch.args)
            .current_dir(&launch.workdir)
            .env_clear()
            .env("PATH", SHELL_PATH)
            .env("HOME", &launch.workdir)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .envs(launch.env.0.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the sandbox shell ({}): {e}", launch.program.display()))?;
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("cannot start the sandbox shell: its pipes were not set up".into());
        };
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(drain_stderr(stderr, stderr_tail.clone()));
        let mut shell = Shell {
            child,
            stdin,
            stdout,
            pgid: Pid::from_raw(pid as i32),
            carry: Vec::new(),
            busy: false,
            reaped: false,
            stderr_tail,
        };
        let failure = match shell.run(&launch.setup, STARTUP_TIMEOUT).await {
            Outcome::Done { code: 0, .. } => return Ok(shell),
            Outcome::Done { output, code } => {
                format!("cannot apply the sandbox resource limits (exit code {code}): {}", lossy(&output.head).trim())
            }
            Outcome::Exited { .. } => {
                let tail = shell.stderr_tail.lock().map(|t| lossy(&t).trim().to_owned()).unwrap_or_default();
                format!("the sandbox shell exited during startup: {tail}")
            }
            Outcome::TimedOut => format!("the sandbox shell did not start within {} s", STARTUP_TIMEOUT.as_secs()),
            Outcome::Failed(e) => format!("cannot talk to the sandbox shell: {e}"),
        };
        shell.kill().await;
        Err(failure)
    }

    /// Kills the shell's whole process group and reaps the shell.
    pub(crate) async fn kill(mut self) {
        self.signal_group();
        if !self.reaped {
            let _ = tokio::time::timeout(KILL_WAIT, self.child.wait()).await;
            self.reaped = true;
        }
    }

    fn signal_group(&self) {
        if !self.reaped {
            // ESRCH just means everything is gone already.
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }

    /// Runs `script` and waits for its marker line, for at most `timeout`.
    async fn run(&mut self, script: &str, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        let marker = format!("__agentd_done_{}", uuid::Uuid::new_v4().simple());
        let line = format!("{script}\nbuiltin printf '\\n%s %d\\n' '{marker}' \"$?\"\n");
        let mut collector = Collector::new(&marker, std::mem::take(&mut self.carry));
        self.busy = true;
        match tokio::time::timeout_at(deadline, self.write(line.as_bytes())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => return self.exited(collector, deadline).await,
            Ok(Err(e)) => return Outcome::Failed(e),
            Err(_elapsed) => return Outcome::TimedOut,
        }
        if let Some(done) = collector.check() {
            return self.finish(done);
        }
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return Outcome::TimedOut,
                read = self.stdout.read(&mut chunk) => match read {
                    Ok(0) => return self.exited(collector, deadline).await,
                    Ok(n) => {
                        if let Some(done) = collector.push(&chunk[..n]) {
                            return self.finish(done);
                        }
                    }
                    Err(e) => return Outcome::Failed(e),
                },
                status = self.child.wait() => {
                    self.reaped = true;
                    // Pick up what the shell wrote before it died.
                    read_for(&mut self.stdout, &mut collector, Duration::from_millis(200)).await;
                    // Best-effort cleanup of jobs it left behind; the group id cannot have been
                    // reused while any of them is alive.
                    let _ = killpg(self.pgid, Signal::SIGKILL);
                    return Outcome::Exited { output: collector.into_captured(), status: status.ok() };
                }
            }
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stdin.write_all(bytes).await?;
        self.stdin.flush().await
    }

    fn finish(&mut self, (output, code, rest): (Captured, i32, Vec<u8>)) -> Outcome {
        self.carry = rest;
        self.busy = false;
        Outcome::Done { output, code }
    }

    /// Stdout closed (or stdin broke): the shell is ending; wait for it within the deadline.
    async fn exited(&mut self, mut collector: Collector, deadline: Instant) -> Outcome {
        read_for(&mut self.stdout, &mut collector, Duration::from_millis(50)).await;
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => Outcome::TimedOut,
            status = self.child.wait() => {
                self.reaped = true;
                Outcome::Exited { output: collector.into_captured(), status: status.ok() }
            }
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        // Covers a Sandbox dropped without `close`: nothing the shell started may outlive it.
        self.signal_group();
    }
}

/// Reads whatever arrives on `stdout` within `window` into `collector`.
async fn read_for(stdout: &mut (impl AsyncRead + Unpin), collector: &mut Collector, window: Duration) {
    let mut chunk = vec![0u8; 64 * 1024];
    let until = Instant::now() + window;
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout_at(until, stdout.read(&mut chunk)).await {
        collector.push(&chunk[..n]);
    }
}

async fn drain_stderr(mut stderr: impl AsyncRead + Unpin, tail: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = vec![0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
        if let Ok(mut tail) = tail.lock() {
            tail.extend_from_slice(&chunk[..n]);
            let excess = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..excess);
        }
    }
}

/// Accumulates a command's output while looking for the marker line `\n<marker> <code>\n`.
/// Memory stays bounded: past the cap only a window at the end is kept, enough to find the
/// marker.
struct Collector {
    buf: Vec<u8>,
    pattern: Vec<u8>,
    search_from: usize,
    dropped: u64,
}

impl Collector {
    fn new(marker: &str, initial: Vec<u8>) -> Self {
        Collector { buf: initial, pattern: format!("\n{marker} ").into_bytes(), search_from: 0, dropped: 0 }
    }

    /// Adds bytes; once the marker line is complete, returns the output, the exit code, and
    /// any bytes that followed the marker line.
    fn push(&mut self, bytes: &[u8]) -> Option<(Captured, i32, Vec<u8>)> {
        self.buf.extend_from_slice(bytes);
        self.check()
    }

    fn check(&mut self) -> Option<(Captured, i32, Vec<u8>)> {
        let found = self.buf[self.search_from..].windows(self.pattern.len()).position(|w| w == self.pattern.as_slice());
        match found {
            Some(offset) => {
                let at = self.search_from + offset;
                let code_start = at + self.pattern.len();
                match self.buf[code_start..].iter().position(|&b| b == b'\n') {
                    Some(len) => {
                        let code = std::str::from_utf8(&self.buf[code_start..code_start + len])
                            .ok()
                            .and_then(|s| s.trim().parse().ok())
                            .unwrap_or(-1);
                        let rest = self.buf[code_start + len + 1..].to_vec();
                        self.buf.truncate(at);
                        let captured = self.take_captured();
                        return Some((captured, code, rest));
                    }
                    None => self.search_from = at,
                }
            }
            None => self.search_from = self.buf.len().saturating_sub(self.pattern.len() - 1),
        }
        self.compact();
        None
    }

    fn compact(&mut self) {
        if self.buf.len() <= MAX_OUTPUT_BYTES + 2 * MARKER_WINDOW {
            return;
        }
        let end = (self.buf.len() - MARKER_WINDOW).min(self.search_from);
        if end > MAX_OUTPUT_BYTES {
            self.buf.drain(MAX_OUTPUT_BYTES..end);
            self.dropped += (end - MAX_OUTPUT_BYTES) as u64;
            self.search_from -= end - MAX_OUTPUT_BYTES;
        }
    }

    fn take_captured(&mut self) -> Captured {
        let total = self.buf.len() as u64 + self.dropped;
        let mut head = std::mem::take(&mut self.buf);
        head.truncate(MAX_OUTPUT_BYTES);
        Captured { head, total }
    }

    /// The output so far when no marker will come; a partial marker line is dropped.
    fn into_captured(mut self) -> Captured {
        if let Some(at) = self.buf.windows(self.pattern.len()).position(|w| w == self.pattern.as_slice()) {
            self.buf.truncate(at);
        }
        self.take_captured()
    }
}

/// The model-facing text for a finished command.
fn render(output: &Captured, code: i32) -> String {
    let mut text = output_text(output);
    if code != 0 {
        text.push_str(&format!("\nexit code: {code}"));
    }
    text
}

fn output_text(output: &Captured) -> String {
    let truncated = output.total > output.head.len() as u64;
    let mut head = output.head.as_slice();
    if truncated && let Err(e) = std::str::from_utf8(head) {
        // Do not end on half a character.
        if e.error_len().is_none() {
            head = &head[..e.valid_up_to()];
        }
    }
    let mut text = lossy(head).trim_end_matches('\n').to_owned();
    if truncated {
        text.push_str(&format!(
            "\n[output truncated: showing the first {} of {} bytes]",
            output.head.len(),
            output.total
        ));
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    text
}

fn exited(output: &Captured, status: Option<ExitStatus>) -> ToolOutput {
    use std::os::unix::process::ExitStatusExt;
    let mut text = output_text(output);
    match status.and_then(|s| s.code()) {
        Some(code) => {
            if code != 0 {
                text.push_str(&format!("\nexit code: {code}"));
            }
            text.push_str("\n(the bash session ended; the next call starts a new one)");
            ToolOutput::text(text)
        }
        None => {
            let signal = status.and_then(|s| s.signal());
            let reason = match signal {
                Some(24) => " (the CPU time limit was reached)".to_owned(),
                Some(25) => " (the file size limit was reached)".to_owned(),
                _ => String::new(),
            };
            let how = signal.map_or("ended unexpectedly".to_owned(), |s| format!("was killed by signal {s}"));
            text.push_str(&format!("\nthe bash session {how}{reason}; the next call starts a new one"));
            ToolOutput::error(text)
        }
    }
}

fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Quotes `s` as one single-quoted shell word.
fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collector_finds_marker_split_across_reads_and_keeps_the_rest() {
        let mut c = Collector::new("M", Vec::new());
        assert!(c.push(b"hello\n").is_none());
        assert!(c.push(b"\nM 4").is_none());
        let (out, code, rest) = c.push(b"2\nlater").unwrap();
        assert_eq!(out.head, b"hello\n");
        assert_eq!(code, 42);
        assert_eq!(rest, b"later");
    }

    #[test]
    fn collector_bounds_memory_and_counts_everything() {
        let mut c = Collector::new("M", Vec::new());
        let block = vec![b'x'; 64 * 1024];
        for _ in 0..100 {
            assert!(c.push(&block).is_none());
            assert!(c.buf.len() <= MAX_OUTPUT_BYTES + 2 * MARKER_WINDOW + block.len());
        }
        let (out, code, _) = c.push(b"\nM 0\n").unwrap();
        assert_eq!(code, 0);
        assert_eq!(out.head.len(), MAX_OUTPUT_BYTES);
        assert_eq!(out.total, 100 * 64 * 1024);
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(single_quote("it's"), r"'it'\''s'");
    }
}
