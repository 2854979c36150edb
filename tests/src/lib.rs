//! Test harness shared by the integration suites in `tests/tests/`: where the real
//! backends are, unique names so parallel runs never collide, throwaway databases,
//! and a launcher that starts `agentd` roles as processes on random ports.

pub mod backends;
pub mod bench;
pub mod gateway;
pub mod process;
pub mod stores;

/// An HTTP client for tests. Installs the process-wide rustls provider (ring) first,
/// as the `agentd` binary does: reqwest is built without one of its own.
pub fn http() -> reqwest::Client {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::new()
}
