//! Exposure gates (docs/api/config.md "MCP and A2A configuration"): which agents of a
//! workspace the A2A server and the MCP endpoint serve. The one place the rule lives:
//! every A2A and MCP path that resolves an agent — the cards, JSON-RPC and HTTP+JSON
//! dispatch on a per-agent endpoint, a new context's or tool call's thread, a task's
//! session, `tools/list` and `tools/call` — asks [`of`] or [`require`] here.
//!
//! A2A's public discovery is ruled here too ([`public_agent`]): the card a caller
//! without a key gets of an agent shows the agent only when A2A exposes it and its
//! metadata publishes it ([`PUBLIC_METADATA_KEY`]); otherwise the answer is the one a
//! missing agent gets (docs/api/a2a.md, "Discovery").
//!
//! An agent a protocol does not expose is, on that protocol, exactly a missing agent:
//! the caller gets the answer it would get for an agent id no agent has. A workspace that
//! never set a protocol's exposure exposes every agent (mode `all`), as before gates
//! existed. The setting is read from the store on every request (one read by primary
//! key, skipped by nothing), so a change is in force on every gateway at once.

use std::collections::HashSet;

use agentd_schema::ids::AgentId;
use agentd_schema::{ExposureRow, Resource, Store};

pub use agentd_schema::{ExposedProtocol as Protocol, ExposureMode as Mode};

use super::error::{DomainError, DomainResult};

/// The most agents a `listed` exposure names.
pub const MAX_LISTED: usize = 1000;

/// A workspace's exposure of one protocol, as read for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    mode: Mode,
    listed: Vec<String>,
    set: HashSet<String>,
}

impl Exposure {
    /// Every agent (the default).
    pub fn all() -> Self {
        Self::new(Mode::All, Vec::new())
    }

    fn new(mode: Mode, listed: Vec<String>) -> Self {
        let set = listed.iter().cloned().collect();
        Self { mode, listed, set }
    }

    /// Whether the protocol serves `agent_id`.
    pub fn exposes(&self, agent_id: &str) -> bool {
        match self.mode {
            Mode::All => true,
            Mode::None => false,
            Mode::Listed => self.set.contains(agent_id),
        }
    }

    /// Whether every agent is exposed (nothing to filter).
    pub fn is_all(&self) -> bool {
        self.mode == Mode::All
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The agents a `listed` exposure names, in the order written (`None` for the other
    /// modes).
    pub fn listed(&self) -> Option<&[String]> {
        (self.mode == Mode::Listed).then_some(self.listed.as_slice())
    }
}

impl From<ExposureRow> for Exposure {
    fn from(row: ExposureRow) -> Self {
        Self::new(row.mode, row.agent_ids)
    }
}

/// The workspace's exposure of `protocol`: one read by primary key.
pub async fn of(store: &dyn Store, workspace_id: &str, protocol: Protocol) -> DomainResult<Exposure> {
    Ok(store.get_exposure(workspace_id, protocol).await?.map_or_else(Exposure::all, Exposure::from))
}

/// `Ok` when `protocol` exposes `agent_id`; otherwise `missing()` — the error the caller
/// answers for an agent that does not exist, so the two cannot be told apart.
pub async fn require(
    store: &dyn Store,
    workspace_id: &str,
    protocol: Protocol,
    agent_id: &str,
    missing: impl FnOnce() -> DomainError,
) -> DomainResult<()> {
    if of(store, workspace_id, protocol).await?.exposes(agent_id) { Ok(()) } else { Err(missing()) }
}

/// The agent metadata key that publishes an agent's A2A card to callers without a key:
/// `"a2a.public": "true"` (any other value, or none, keeps the card private). The key
/// holder writes it like any metadata (`POST /v1/agents/{id}`, or an agent draft).
pub const PUBLIC_METADATA_KEY: &str = "a2a.public";

/// Whether A2A's public discovery shows `agent`: A2A exposes it, it is not archived, and
/// its metadata publishes it ([`PUBLIC_METADATA_KEY`]).
pub fn is_public(exposure: &Exposure, agent: &Resource) -> bool {
    agent.archived_at_ms.is_none()
        && exposure.exposes(&agent.id)
        && agent.body["metadata"][PUBLIC_METADATA_KEY].as_str() == Some("true")
}

/// The agent `agent_id` of the workspace named `workspace` (its id or name), when A2A's
/// public discovery shows it ([`is_public`]); `None` alike for a missing workspace, a
/// missing agent and a private one. The same three reads happen in every case, so the
/// time of the answer does not tell them apart either.
pub async fn public_agent(store: &dyn Store, workspace: &str, agent_id: &str) -> DomainResult<Option<Resource>> {
    let found = store.find_workspace(workspace).await?;
    // A workspace that does not exist is read as one that has nothing.
    let workspace_id = found.as_ref().map_or("", |w| w.id.as_str());
    let agent = store.get_resource(workspace_id, super::agents::KIND, agent_id).await?;
    let exposure = of(store, workspace_id, Protocol::A2a).await?;
    Ok(agent.filter(|agent| found.is_some() && is_public(&exposure, agent)))
}

/// What a control-plane write sets for one protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The mode.
    pub mode: Mode,
    /// The agents exposed, for `listed` only.
    pub agent_ids: Vec<String>,
}

/// The workspace's setting of `protocol`: the stored row, or `None` when never set
/// (mode `all`).
pub async fn get(store: &dyn Store, workspace_id: &str, protocol: Protocol) -> DomainResult<Option<ExposureRow>> {
    Ok(store.get_exposure(workspace_id, protocol).await?)
}

/// Sets the workspace's exposure of `protocol`. `listed` names 0 to [`MAX_LISTED`]
/// agents of the workspace, each once (archived ones too: they may be unarchived
/// later); the other modes name none. A rule broken is `Invalid` naming the field.
pub async fn set(
    store: &dyn Store,
    workspace_id: &str,
    protocol: Protocol,
    setting: Setting,
) -> DomainResult<ExposureRow> {
    if setting.mode != Mode::Listed && !setting.agent_ids.is_empty() {
        return Err(DomainError::invalid(format!(
            "agent_ids: only with mode \"listed\" (mode is {:?})",
            setting.mode.as_str()
        )));
    }
    if setting.agent_ids.len() > MAX_LISTED {
        return Err(DomainError::invalid(format!(
            "agent_ids: at most {MAX_LISTED} agents, got {}",
            setting.agent_ids.len()
        )));
    }
    let mut seen = HashSet::new();
    for (i, id) in setting.agent_ids.iter().enumerate() {
        let missing = || DomainError::invalid(format!("agent_ids[{i}]: no agent {id} in this workspace"));
        if AgentId::parse(id).is_err() {
            return Err(missing());
        }
        if !seen.insert(id.as_str()) {
            return Err(DomainError::invalid(format!("agent_ids[{i}]: agent {id} is listed twice")));
        }
        if store.get_resource(workspace_id, super::agents::KIND, id).await?.is_none() {
            return Err(missing());
        }
    }
    Ok(store.put_exposure(workspace_id, protocol, setting.mode, &setting.agent_ids).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_exposes_what_it_says() {
        let all = Exposure::all();
        assert!(all.is_all() && all.exposes("agent_a") && all.listed().is_none());
        let none = Exposure::new(Mode::None, Vec::new());
        assert!(!none.exposes("agent_a") && !none.is_all());
        let listed = Exposure::new(Mode::Listed, vec!["agent_a".into()]);
        assert!(listed.exposes("agent_a") && !listed.exposes("agent_b"));
        assert_eq!(listed.listed(), Some(&["agent_a".to_owned()][..]));
    }

    fn agent(metadata: serde_json::Value, archived: bool) -> Resource {
        Resource {
            id: "agent_a".into(),
            workspace_id: "wrkspc_a".into(),
            kind: super::super::agents::KIND.into(),
            parent_id: None,
            version: 1,
            body: serde_json::json!({ "name": "a", "metadata": metadata }),
            created_at_ms: 0,
            updated_at_ms: 0,
            archived_at_ms: archived.then_some(1),
        }
    }

    #[test]
    fn only_an_exposed_live_agent_its_metadata_publishes_is_public() {
        let all = Exposure::all();
        assert!(is_public(&all, &agent(serde_json::json!({ "a2a.public": "true" }), false)));
        for metadata in [
            serde_json::json!({}),
            serde_json::json!({ "a2a.public": "false" }),
            serde_json::json!({ "a2a.public": "TRUE" }),
            serde_json::json!({ "a2a.public": "yes" }),
            serde_json::json!({ "a2a_public": "true" }),
        ] {
            assert!(!is_public(&all, &agent(metadata.clone(), false)), "{metadata}");
        }
        let public = serde_json::json!({ "a2a.public": "true" });
        assert!(!is_public(&all, &agent(public.clone(), true)), "archived");
        assert!(!is_public(&Exposure::new(Mode::None, Vec::new()), &agent(public.clone(), false)), "hidden");
        let listed = Exposure::new(Mode::Listed, vec!["agent_b".into()]);
        assert!(!is_public(&listed, &agent(public, false)), "not listed");
    }
}
