//! Escape attempts a hostile model would make, each at both isolation levels, through the
//! sandbox's public API. They need root (a uid per session); the namespace level needs
//! bubblewrap, which the project's setup installs: its absence fails them.

use std::path::Path;

use serde_json::json;

use super::tests::{
    Root, assert_err, assert_ok, bash, config, no_network, processes_running, running_as_root, session_uid, text,
    wait_until_gone, wait_until_running,
};
use super::*;

/// Generates `<test>::workdir` and `<test>::namespace` from `async fn <test>(Isolation)`.
macro_rules! at_both_levels {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[tokio::test]
            async fn workdir() {
                super::$test(super::Isolation::Workdir).await
            }

            #[tokio::test]
            async fn namespace() {
                super::$test(super::Isolation::Namespace).await
            }
        }
    )*};
}

at_both_levels!(
    sessions_cannot_reach_each_others_files,
    detached_processes_die_with_the_timeout_the_close_and_the_session,
    detached_processes_die_with_the_runner,
    the_process_limit_is_per_session,
    the_disk_quota_stops_writes_before_the_host_disk,
    limited_networking_has_no_network,
    agentd_paths_are_not_visible,
    vault_variables_reach_the_shell,
);

/// Escape tests need root (a uid per session); the namespace level needs bubblewrap,
/// which the project's setup (`scripts/test`) installs: its absence is a failure.
fn escape_config(root: &Path, isolation: Isolation, limits: Limits) -> Option<SandboxConfig> {
    if !running_as_root() {
        return None;
    }
    assert!(
        isolation == Isolation::Workdir || super::bubblewrap_available(),
        "namespace isolation is the default and needs bubblewrap: apt-get install bubblewrap (scripts/test does)"
    );
    Some(SandboxConfig { isolation, ..config(root, limits) })
}

/// A name no other test uses, for files and processes outside the workdir.
fn unique(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

async fn sessions_cannot_reach_each_others_files(isolation: Isolation) {
    let root = Root::new();
    let Some(cfg) = escape_config(root.path(), isolation, Limits::default()) else { return };
    let mut a = Sandbox::open(&cfg, "sess_alice").unwrap();
    let mut b = Sandbox::open(&cfg, "sess_bob").unwrap();
    assert_ne!(session_uid(&a), session_uid(&b), "two sessions share a uid");
    let scratch = format!("/tmp/{}", unique("agentd_probe_"));
    assert_ok(&bash(&mut a, &format!("echo alice-secret > mine && echo alice-tmp > {scratch}")).await);
    let a_dir = a.workdir().display().to_string();
    for attempt in [
        format!("cat {a_dir}/mine"),
        format!("ls {a_dir}"),
        format!("echo planted > {a_dir}/planted"),
        format!("cat {scratch}"),
        "cat ../sess_alice/mine".to_owned(),
    ] {
        let out = bash(&mut b, &attempt).await;
        let body = text(&out);
        assert!(body.contains("exit code:"), "{attempt}: {body}");
        assert!(!body.contains("alice-"), "{attempt} read another session's file: {body}");
    }
    assert!(!a.workdir().join("planted").exists());
    assert!(!Path::new(&scratch).exists(), "a session's /tmp is the host's /tmp");
    // The file tools are confined too (by path, whatever the uid).
    let out = b.call("read", &json!({ "file_path": format!("{a_dir}/mine") })).await;
    assert!(assert_err(&out).contains("escapes"), "{out:?}");
    a.close().await;
    b.close().await;
}

async fn detached_processes_die_with_the_timeout_the_close_and_the_session(isolation: Isolation) {
    let root = Root::new();
    let Some(cfg) = escape_config(root.path(), isolation, Limits::default()) else { return };
    let mut s = Sandbox::open(&cfg, "sess_detach").unwrap();
    let detach = |tag: &str| {
        format!(
            "setsid sleep {tag}1 </dev/null >/dev/null 2>&1 & nohup sleep {tag}2 </dev/null >/dev/null 2>&1 & disown -a"
        )
    };
    let level = if isolation == Isolation::Workdir { 1 } else { 2 };
    for (tag, end) in
        [(format!("7.1{level}1"), "timeout"), (format!("7.1{level}2"), "close"), (format!("7.1{level}3"), "discard")]
    {
        let tag = tag.as_str();
        assert_ok(&bash(&mut s, &detach(tag)).await);
        let (first, second) = (format!("{tag}1"), format!("{tag}2"));
        assert_eq!(wait_until_running(&["sleep", &first]).await.len(), 1, "{end}");
        assert_eq!(wait_until_running(&["sleep", &second]).await.len(), 1, "{end}");
        match end {
            "timeout" => {
                let out = s.call("bash", &json!({"command": "sleep 30", "timeout_ms": 300})).await;
                assert!(assert_err(&out).contains("timed out"));
            }
            "close" => s.close().await,
            _ => {
                let workdir = s.workdir().to_path_buf();
                s.discard().await.unwrap();
                assert!(!workdir.exists(), "the workdir outlived its session");
                let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
                assert!(!mounts.contains(&workdir.display().to_string()), "its tmpfs is still mounted");
                assert_eq!(wait_until_gone(&["sleep", &first]).await, Vec::<u32>::new(), "{end}: setsid survived");
                assert_eq!(wait_until_gone(&["sleep", &second]).await, Vec::<u32>::new(), "{end}: nohup survived");
                return;
            }
        }
        assert_eq!(wait_until_gone(&["sleep", &first]).await, Vec::<u32>::new(), "{end}: setsid survived");
        assert_eq!(wait_until_gone(&["sleep", &second]).await, Vec::<u32>::new(), "{end}: nohup survived");
    }
}

async fn detached_processes_die_with_the_runner(isolation: Isolation) {
    let root = Root::new();
    let Some(cfg) = escape_config(root.path(), isolation, Limits::default()) else { return };
    let s = Sandbox::open(&cfg, "sess_orphan").unwrap();
    // A stand-in for the runner: a process that starts the sandbox shell exactly as the
    // runner does and is then SIGKILLed (no clean-up code of ours runs).
    let tag = if isolation == Isolation::Workdir { "7.211" } else { "7.212" };
    let mut runner = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("printf 'setsid sleep {tag} </dev/null >/dev/null 2>&1 & sleep 100\\n' | \"$@\"; sleep 100"))
        .arg("runner")
        .arg(&s.launch.program)
        .args(&s.launch.args)
        .current_dir(s.workdir())
        .env_clear()
        .env("PATH", crate::tools::bash::SHELL_PATH)
        .spawn()
        .unwrap();
    assert_eq!(wait_until_running(&["sleep", tag]).await.len(), 1);
    runner.kill().unwrap();
    runner.wait().unwrap();
    assert_eq!(wait_until_gone(&["sleep", tag]).await, Vec::<u32>::new(), "a detached process outlived the runner");
}

async fn the_process_limit_is_per_session(isolation: Isolation) {
    let root = Root::new();
    let limits = Limits { processes: 24, ..Limits::default() };
    let Some(cfg) = escape_config(root.path(), isolation, limits) else { return };
    let mut greedy = Sandbox::open(&cfg, "sess_greedy").unwrap();
    let mut other = Sandbox::open(&cfg, "sess_other").unwrap();
    assert_ok(&bash(&mut other, "true").await);
    let tag = if isolation == Isolation::Workdir { "7.311" } else { "7.312" };
    let out = greedy
        .call("bash", &json!({"command": format!("for i in $(seq 1 60); do sleep {tag} & done; echo spawned"), "timeout_ms": 2000}))
        .await;
    let body = text(&out);
    assert!(out.is_error || body.contains("fork"), "the process limit did not hold: {out:?}");
    assert!(processes_running(&["sleep", tag]).len() <= 24, "more processes than the limit");
    // Another session can still start processes: the limit is not shared.
    for _ in 0..5 {
        assert_eq!(assert_ok(&bash(&mut other, "/bin/echo forked").await), "forked");
    }
    greedy.close().await;
    other.close().await;
    assert_eq!(wait_until_gone(&["sleep", tag]).await, Vec::<u32>::new());
}

async fn the_disk_quota_stops_writes_before_the_host_disk(isolation: Isolation) {
    let root = Root::new();
    let quota = 1024 * 1024;
    let Some(cfg) = escape_config(root.path(), isolation, Limits { disk_bytes: quota, ..Limits::default() }) else {
        return;
    };
    let mut s = Sandbox::open(&cfg, "sess_quota").unwrap();
    let host = nix::sys::statvfs::statvfs(root.path()).unwrap();
    let host_free = host.blocks_available() as u64 * host.fragment_size() as u64;

    let out = s.call("write", &json!({"file_path": "big.txt", "content": "x".repeat(2 * 1024 * 1024)})).await;
    assert!(assert_err(&out).contains("disk quota of 1048576 bytes"), "{out:?}");
    assert!(!s.workdir().join("big.txt").exists());
    assert_ok(&s.call("write", &json!({"file_path": "fits.txt", "content": "y".repeat(300 * 1024)})).await);

    for target in ["big.bin", "/tmp/big.bin"] {
        let out = assert_ok(&bash(&mut s, &format!("head -c 3000000 /dev/zero > {target}; echo rc=$?")).await);
        assert!(out.contains("No space left on device") && out.contains("rc=1"), "{target}: {out}");
    }
    let used = assert_ok(&bash(&mut s, "du -sk . | cut -f1").await).parse::<u64>().unwrap();
    assert!(used <= 1024, "the workdir holds {used} KiB, over its 1024 KiB quota");
    let host = nix::sys::statvfs::statvfs(root.path()).unwrap();
    let host_free_after = host.blocks_available() as u64 * host.fragment_size() as u64;
    // Nothing the session wrote landed on the host's disk (other tests may write meanwhile).
    assert!(host_free_after + 64 * 1024 * 1024 > host_free, "the host lost {} bytes", host_free - host_free_after);
    s.close().await;
}

async fn limited_networking_has_no_network(isolation: Isolation) {
    let root = Root::new();
    let Some(open) = escape_config(root.path(), isolation, Limits::default()) else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let mut unrestricted = Sandbox::open(&open, "sess_net_open").unwrap();
    assert_eq!(assert_ok(&bash(&mut unrestricted, &probe).await), "connected", "the control probe failed");
    unrestricted.close().await;

    let cut = SandboxConfig { networking: no_network(), ..open };
    let mut limited = Sandbox::open(&cut, "sess_net_cut").unwrap();
    let out = assert_ok(&bash(&mut limited, &probe).await);
    assert!(!out.contains("connected") && out.contains("exit code:"), "limited networking reached the host: {out}");
    let interfaces = assert_ok(&bash(&mut limited, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '").await);
    assert_eq!(interfaces, "lo", "a sandbox without network sees other interfaces");
    limited.close().await;
}

async fn agentd_paths_are_not_visible(isolation: Isolation) {
    use std::os::unix::fs::PermissionsExt;
    // agentd's data directory as `agentd dev` makes it: 0700, the database 0600.
    let data = Root::new();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let db = data.path().join("agentd.db");
    std::fs::write(&db, "SQLite format 3 secret-history").unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let separate = Root::new();
    let root = match isolation {
        Isolation::Namespace => data.path().join("sandboxes"),
        Isolation::Workdir => separate.path().to_path_buf(),
    };
    let Some(cfg) = escape_config(&root, isolation, Limits::default()) else { return };
    if isolation == Isolation::Workdir {
        // Inside the 0700 data directory the workdir level cannot work, and says why.
        let inside = SandboxConfig { root: data.path().join("sandboxes"), ..cfg.clone() };
        match Sandbox::open(&inside, "sess_inside") {
            Err(SandboxError::Unavailable(message)) => assert!(message.contains("AGENTD_SANDBOX_ROOT"), "{message}"),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
    let mut s = Sandbox::open(&cfg, "sess_snoop").unwrap();
    let data_dir = data.path().display().to_string();
    for attempt in [format!("cat {}", db.display()), format!("ls -A {data_dir}"), "cat /proc/1/environ".into()] {
        let out = text(&bash(&mut s, &attempt).await);
        assert!(!out.contains("secret-history"), "{attempt}: {out}");
        if isolation == Isolation::Workdir || !attempt.starts_with("ls") {
            assert!(out.contains("exit code:"), "{attempt}: {out}");
        }
    }
    if isolation == Isolation::Namespace {
        // Only the way to its own workdir exists, passable but not listable; the database
        // is not there at all.
        let out = text(&bash(&mut s, &format!("cat {}", db.display())).await);
        assert!(out.contains("No such file or directory"), "{out}");
        for listed in [data_dir.clone(), format!("{data_dir}/sandboxes")] {
            let out = text(&bash(&mut s, &format!("ls -A {listed}")).await);
            assert!(out.contains("Permission denied"), "{listed}: {out}");
        }
        let workdir = s.workdir().display().to_string();
        assert_eq!(assert_ok(&bash(&mut s, &format!("cd / && cd {workdir} && pwd")).await), workdir);
    }
    s.close().await;
}

async fn vault_variables_reach_the_shell(isolation: Isolation) {
    let root = Root::new();
    let Some(cfg) = escape_config(root.path(), isolation, Limits::default()) else { return };
    let cfg = SandboxConfig { environment: SecretEnv(vec![("DEPLOY_TOKEN".into(), "tok-12345".into())]), ..cfg };
    assert!(!format!("{cfg:?}").contains("tok-12345"), "a secret appears in Debug output");
    let mut s = Sandbox::open(&cfg, "sess_vars").unwrap();
    assert_eq!(assert_ok(&bash(&mut s, "echo \"$DEPLOY_TOKEN\"").await), "tok-12345");
    // Not on any command line another process could read.
    let out = assert_ok(&bash(&mut s, "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '").await);
    assert!(!out.contains("tok-12345"), "{out}");
    s.close().await;
}
