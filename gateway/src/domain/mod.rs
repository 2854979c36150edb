//! The domain layer: every operation a surface offers, with its rules, once. Managed
//! handlers, the durable routes, the live inbox and the four adapters parse their wire
//! format, call a service here and render its answer or its [`DomainError`] in their own
//! shape. Nothing here knows HTTP: no axum type appears in this module (a test below
//! keeps it so), and no service calls a handler. ADR 0013.

pub mod agent_drafts;
pub mod agents;
pub mod app_tokens;
pub mod commit;
pub mod consent_links;
pub mod cron;
pub mod deployments;
pub mod dreams;
pub mod environments;
pub mod erasure;
pub mod error;
pub mod exposure;
pub mod files;
pub mod hands;
pub mod inbox;
pub mod input;
pub mod mcp_config;
pub mod memory;
pub mod memory_mounts;
pub mod multiagent;
pub mod providers;
pub mod runs;
pub mod sandbox_policies;
pub mod session_threads;
pub mod sessions;
pub mod skill_upload;
pub mod skills;
pub mod threads;
pub mod tunnels;
pub mod user_profiles;
pub mod webhooks;
pub mod workflows;

pub use error::{DomainError, DomainResult};

#[cfg(test)]
mod tests {
    /// The domain layer stays transport-neutral: its files never name axum (or http).
    #[test]
    fn no_http_types_in_the_domain_layer() {
        let mut pending = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/domain")];
        let mut files = Vec::new();
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("src/domain") {
                let path = entry.expect("entry").path();
                if path.is_dir() { pending.push(path) } else { files.push(path) }
            }
        }
        let mut checked = 0;
        for path in files {
            let text = std::fs::read_to_string(&path).expect("source");
            for forbidden in ["axum", "http::", "IntoResponse"] {
                let hits: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//") && !l.contains("forbidden"))
                    .filter(|l| l.contains(forbidden))
                    .collect();
                assert!(hits.is_empty(), "{} names {forbidden}: {hits:?}", path.display());
            }
            checked += 1;
        }
        assert!(checked >= 7, "only {checked} files checked");
    }
}
