//! Starts `agentd` roles as real processes and waits until they are ready.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// The `agentd` binary under test: `$AGENTD_BIN`, else the workspace's debug build.
pub fn agentd_bin() -> PathBuf {
    if let Ok(path) = std::env::var("AGENTD_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("debug/agentd");
    assert!(
        path.exists(),
        "{} does not exist: run `cargo build --workspace` first (scripts/test does)",
        path.display()
    );
    path
}

/// A running `agentd` process; killed when dropped.
pub struct Agentd {
    child: Child,
    /// Base URL of its HTTP listener (`http://127.0.0.1:port`).
    pub http: String,
    /// Base URL of its operations listener (`/readyz`, `/metrics`, `/admin/drain`).
    pub ops: String,
    /// Its gRPC health address, if it serves one.
    pub grpc: Option<String>,
    /// Everything it wrote to stderr so far is kept here for failure messages.
    stderr: mpsc::UnboundedReceiver<String>,
    stderr_seen: Vec<String>,
}

/// What to start.
pub struct Launch {
    args: Vec<String>,
    envs: Vec<(String, String)>,
    cwd: Option<PathBuf>,
}

impl Launch {
    /// `agentd <role>` listening on random loopback ports: API, operations (so that
    /// several processes share a host) and, except for dev, gRPC health.
    pub fn role(role: &str) -> Self {
        let mut envs = vec![
            ("AGENTD_HTTP_ADDR".to_owned(), "127.0.0.1:0".to_owned()),
            ("AGENTD_OPS_ADDR".to_owned(), "127.0.0.1:0".to_owned()),
        ];
        if role != "dev" {
            envs.push(("AGENTD_GRPC_ADDR".to_owned(), "127.0.0.1:0".to_owned()));
        }
        Self { args: vec![role.to_owned()], envs, cwd: None }
    }

    fn has_env(&self, key: &str) -> bool {
        self.envs.iter().any(|(k, _)| k == key)
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: &str, value: impl Into<String>) -> Self {
        self.envs.push((key.to_owned(), value.into()));
        self
    }

    /// Appends a command-line argument (e.g. a subcommand's).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Runs in `dir`.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    fn command(&self) -> Command {
        let mut command = Command::new(agentd_bin());
        command.args(&self.args).env_clear();
        // Keep only what the process needs from the test environment: no AGENTD_*
        // leaks in from the developer's shell.
        for key in ["PATH", "HOME", "RUST_LOG", "RUST_BACKTRACE"] {
            if let Ok(value) = std::env::var(key) {
                command.env(key, value);
            }
        }
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        command
    }

    /// Runs the command to completion (for `migrate` and startup failures).
    pub async fn output(&self) -> std::process::Output {
        let mut command = self.command();
        tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("agentd did not exit within 60 s")
            .expect("spawn agentd")
    }

    /// Starts the process and waits for its listeners to be announced.
    pub async fn start(self) -> Agentd {
        let mut command = self.command();
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = command.spawn().expect("spawn agentd");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (err_tx, err_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if err_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (out_tx, mut out_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if out_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let role = self.args[0].as_str();
        let wants_http = matches!(role, "dev" | "gateway");
        let wants_ops = matches!(role, "dev" | "gateway" | "worker");
        let wants_grpc = self.has_env("AGENTD_GRPC_ADDR");
        let mut agentd = Agentd {
            child,
            http: String::new(),
            ops: String::new(),
            grpc: None,
            stderr: err_rx,
            stderr_seen: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let http_ready = !wants_http || !agentd.http.is_empty();
            let ops_ready = !wants_ops || !agentd.ops.is_empty();
            let grpc_ready = !wants_grpc || agentd.grpc.is_some();
            if http_ready && ops_ready && grpc_ready {
                break;
            }
            let line = match tokio::time::timeout_at(deadline.into(), out_rx.recv()).await {
                Ok(Some(line)) => line,
                _ => panic!("agentd did not announce its listeners; stderr:\n{}", agentd.stderr_text()),
            };
            if let Some(url) = line.strip_prefix("agentd: http listening on ") {
                agentd.http = url.trim().to_owned();
            } else if let Some(url) = line.strip_prefix("agentd: ops listening on ") {
                agentd.ops = url.trim().to_owned();
            } else if let Some(addr) = line.strip_prefix("agentd: grpc listening on ") {
                agentd.grpc = Some(addr.trim().to_owned());
            }
        }
        // A worker has no API: its one listener is the operations one.
        if agentd.http.is_empty() {
            agentd.http = agentd.ops.clone();
        }
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while out_rx.recv().await.is_some() {} });
        agentd
    }
}

impl Agentd {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("process is running")
    }

    /// Stderr collected so far.
    pub fn stderr_text(&mut self) -> String {
        while let Ok(line) = self.stderr.try_recv() {
            self.stderr_seen.push(line);
        }
        self.stderr_seen.join("\n")
    }

    /// Sends SIGTERM and waits for the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.pid().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().await.expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("agentd did not exit within 60 s of SIGTERM")
            .expect("wait for agentd")
    }

    /// Polls `GET {ops}/readyz` (the operations listener's, with backend details)
    /// until it answers `want`, or panics after `within`.
    pub async fn wait_ready(&mut self, want: u16, within: Duration) -> serde_json::Value {
        let client = crate::http();
        let deadline = Instant::now() + within;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            if let Ok(response) = client.get(format!("{}/readyz", self.ops)).send().await {
                let status = response.status().as_u16();
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                if status == want {
                    return body;
                }
                last = format!("{status} {body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("/readyz never answered {want} within {within:?}; last: {last}; stderr:\n{}", self.stderr_text());
    }
}
