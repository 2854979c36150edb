//! The model catalog: which model ids exist, which provider serves each, how they are
//! described to clients, and their list prices (the budget's price snapshot is frozen
//! from here at session creation). Built in, and extensible from the JSON file named
//! by `AGENTD_MODEL_CATALOG`. Prices are integers — micro-USD per million tokens — so
//! budget arithmetic never touches floating point.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// List prices of one model: tokens in micro-USD per million tokens, server tool
/// requests (`web_search`, `web_fetch`) in micro-USD per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Prices {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Prompt-cache reads.
    #[serde(default)]
    pub cache_read: u64,
    /// Prompt-cache writes.
    #[serde(default)]
    pub cache_write: u64,
    /// One `web_search` request, micro-USD.
    #[serde(default)]
    pub web_search_per_request: u64,
    /// One `web_fetch` request, micro-USD.
    #[serde(default)]
    pub web_fetch_per_request: u64,
}

/// Anthropic's list price of a web search: $10 per 1,000 searches.
const WEB_SEARCH_PER_REQUEST: u64 = 10_000;

/// Which wire protocol a configured provider speaks (`/v1/config/providers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// The Anthropic Messages API (`x-api-key`).
    Anthropic,
    /// OpenAI-compatible Chat Completions (bearer token).
    OpenAiCompatible,
}

impl ProviderKind {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAiCompatible => "openai_compatible",
        }
    }

    /// From the stored or wire name.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "anthropic" => Some(ProviderKind::Anthropic),
            "openai_compatible" => Some(ProviderKind::OpenAiCompatible),
            _ => None,
        }
    }
}

/// A provider credential as a route carries it: still sealed (for owner `id`), opened
/// by the worker that uses it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SealedCredential {
    /// `pcrd_…`
    pub id: String,
    /// `SecretBox::seal(id, {"api_key": …})`.
    pub sealed: String,
}

/// The endpoint a configured model is sent to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteEndpoint {
    /// The endpoint's id.
    pub id: String,
    /// Base URL (`…/v1/messages` or `…/chat/completions` is appended).
    pub base_url: String,
    /// Connection timeout, ms.
    pub connect_timeout_ms: Option<i64>,
    /// Whole-request timeout, ms.
    pub request_timeout_ms: Option<i64>,
    /// Whether the endpoint names a credential (or pool) at all.
    pub authenticated: bool,
    /// The usable (unarchived) credentials, in the order they are tried.
    pub credentials: Vec<SealedCredential>,
    /// How long a refused credential of a pool is passed over, ms (0: never).
    pub cooldown_ms: i64,
}

/// Where a configured model is served: set only for models a workspace's
/// configuration offers (`POST /v1/config/offerings`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// The provider's id.
    pub provider_id: String,
    /// Its protocol.
    pub kind: ProviderKind,
    /// The model's name at the provider.
    pub provider_model: String,
    /// Its serving endpoint; `None` while the provider has none.
    pub endpoint: Option<RouteEndpoint>,
}

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Model id, e.g. `claude-sonnet-4-5`.
    pub id: String,
    /// Which provider serves it: `anthropic`, `openai` or `scripted`.
    pub provider: String,
    /// Human-readable name.
    pub display_name: String,
    /// Model line (`opus`, `sonnet`, `haiku`), if any.
    pub line: Option<String>,
    /// Release date, RFC 3339.
    pub created_at: String,
    /// Context window.
    pub max_input_tokens: u64,
    /// Maximum `max_tokens`.
    pub max_tokens: u64,
    /// Effort level used when an agent does not choose one.
    pub default_effort: String,
    /// List prices; `None` makes the model unbudgetable.
    pub prices: Option<Prices>,
    /// Where a workspace's configuration sends it (`None`: by `provider`, as configured
    /// by the environment).
    pub route: Option<Route>,
}

impl Model {
    /// The `model` object of the Models API.
    pub fn to_wire(&self) -> Value {
        let yes = json!({ "supported": true });
        let no = json!({ "supported": false });
        json!({
            "type": "model",
            "id": self.id,
            "display_name": self.display_name,
            "created_at": self.created_at,
            "lifecycle": "active",
            "line": self.line,
            "deprecated_at": null,
            "retires_at": null,
            "max_input_tokens": self.max_input_tokens,
            "max_tokens": self.max_tokens,
            "allowed_fallback_models": [],
            "capabilities": {
                "batch": no,
                "citations": yes,
                "code_execution": no,
                "context_management": { "supported": false },
                "effort": { "supported": true, "low": yes, "medium": yes, "high": yes, "max": yes, "xhigh": no },
                "image_input": yes,
                "pdf_input": yes,
                "server_tools": { "supported": false, "code_execution": no, "web_search": no },
                "structured_outputs": yes,
                "thinking": {
                    "supported": true,
                    "types": { "adaptive": yes, "between_tools": no, "disabled": yes, "enabled": yes }
                }
            }
        })
    }
}

/// One entry of an `AGENTD_MODEL_CATALOG` file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    id: String,
    provider: String,
    display_name: Option<String>,
    line: Option<String>,
    created_at: Option<String>,
    max_input_tokens: Option<u64>,
    max_tokens: Option<u64>,
    default_effort: Option<String>,
    /// Micro-USD per million tokens (and per web search / fetch request); omit for a
    /// model without a list price.
    prices: Option<Prices>,
}

/// A model catalog: the process's bootstrap one (built in, `AGENTD_MODEL_CATALOG`), or
/// a workspace's effective one (`crate::catalogs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    models: Vec<Model>,
    /// The workspace's `config_revision` it reflects (0: the bootstrap catalog).
    revision: i64,
}

fn claude(id: &str, name: &str, line: &str, created: &str, max_tokens: u64, input: u64, output: u64) -> Model {
    Model {
        id: id.to_owned(),
        provider: "anthropic".to_owned(),
        display_name: name.to_owned(),
        line: Some(line.to_owned()),
        created_at: created.to_owned(),
        max_input_tokens: 200_000,
        max_tokens,
        default_effort: "high".to_owned(),
        // A web fetch costs nothing beyond the tokens of its content.
        prices: Some(Prices {
            input,
            output,
            cache_read: input / 10,
            cache_write: input * 5 / 4,
            web_search_per_request: WEB_SEARCH_PER_REQUEST,
            web_fetch_per_request: 0,
        }),
        route: None,
    }
}

impl Catalog {
    /// A catalog of `models` (newest first) at a configuration revision.
    pub fn from_models(models: Vec<Model>, revision: i64) -> Self {
        Self { models, revision }
    }

    /// The workspace configuration revision this catalog reflects (0: bootstrap only).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The built-in catalog, newest first (the Models API lists newest first).
    pub fn builtin() -> Self {
        Self {
            models: vec![
                claude(
                    "claude-sonnet-4-6",
                    "Claude Sonnet 4.6",
                    "sonnet",
                    "2026-02-17T00:00:00Z",
                    64_000,
                    3_000_000,
                    15_000_000,
                ),
                claude(
                    "claude-opus-4-6",
                    "Claude Opus 4.6",
                    "opus",
                    "2026-02-05T00:00:00Z",
                    128_000,
                    5_000_000,
                    25_000_000,
                ),
                claude(
                    "claude-haiku-4-5",
                    "Claude Haiku 4.5",
                    "haiku",
                    "2025-10-01T00:00:00Z",
                    64_000,
                    1_000_000,
                    5_000_000,
                ),
                claude(
                    "claude-sonnet-4-5",
                    "Claude Sonnet 4.5",
                    "sonnet",
                    "2025-09-29T00:00:00Z",
                    64_000,
                    3_000_000,
                    15_000_000,
                ),
            ],
            revision: 0,
        }
    }

    /// The built-in catalog extended (or overridden, by id) from a JSON array file.
    pub fn with_file(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let entries: Vec<FileEntry> =
            serde_json::from_str(&text).map_err(|e| format!("invalid model catalog {}: {e}", path.display()))?;
        let mut catalog = Self::builtin();
        for entry in entries {
            if !["anthropic", "openai", "scripted"].contains(&entry.provider.as_str()) {
                return Err(format!(
                    "model {}: unknown provider {:?} (anthropic, openai, scripted)",
                    entry.id, entry.provider
                ));
            }
            let model = Model {
                display_name: entry.display_name.unwrap_or_else(|| entry.id.clone()),
                id: entry.id,
                provider: entry.provider,
                line: entry.line,
                created_at: entry.created_at.unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned()),
                max_input_tokens: entry.max_input_tokens.unwrap_or(128_000),
                max_tokens: entry.max_tokens.unwrap_or(8_192),
                default_effort: entry.default_effort.unwrap_or_else(|| "high".to_owned()),
                prices: entry.prices,
                route: None,
            };
            catalog.models.retain(|m| m.id != model.id);
            catalog.models.insert(0, model);
        }
        Ok(catalog)
    }

    /// Every model, newest first.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// A model of the catalog.
    pub fn find(&self, id: &str) -> Option<&Model> {
        self.models.iter().find(|model| model.id == id)
    }

    /// The provider for `id`: the catalog's (a configured route's provider id), else by
    /// naming convention (`claude-*` → anthropic, `openai/<model>` → openai). `None` for
    /// ids nothing can serve.
    pub fn provider_of(&self, id: &str) -> Option<&str> {
        match self.find(id) {
            Some(Model { route: Some(route), .. }) => Some(route.provider_id.as_str()),
            Some(model) => Some(model.provider.as_str()),
            None if id.starts_with("openai/") => Some("openai"),
            None if id.starts_with("claude-") => Some("anthropic"),
            None => None,
        }
    }
}

static CATALOG: OnceLock<Catalog> = OnceLock::new();

/// Installs the process's catalog (once, at startup); later calls are ignored.
pub fn install(catalog: Catalog) {
    let _ = CATALOG.set(catalog);
}

/// The process's catalog (the built-in one unless another was installed).
pub fn current() -> &'static Catalog {
    CATALOG.get_or_init(Catalog::builtin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_extend_and_override_and_unknown_ids_route_by_name() {
        let dir = std::env::temp_dir().join(format!("catalog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("models.json");
        std::fs::write(
            &path,
            r#"[{"id":"llama-3","provider":"openai","prices":{"input":100000,"output":200000}},
                                  {"id":"claude-sonnet-4-5","provider":"anthropic","display_name":"Mine"}]"#,
        )
        .unwrap();
        let catalog = Catalog::with_file(&path).unwrap();
        assert_eq!(catalog.provider_of("llama-3"), Some("openai"));
        assert_eq!(catalog.find("claude-sonnet-4-5").unwrap().display_name, "Mine");
        assert_eq!(catalog.find("claude-sonnet-4-5").unwrap().prices, None, "overrides replace the whole entry");
        assert_eq!(catalog.provider_of("claude-future-9"), Some("anthropic"));
        assert_eq!(catalog.provider_of("openai/gpt-x"), Some("openai"));
        assert_eq!(catalog.provider_of("mystery"), None);
        std::fs::write(&path, r#"[{"id":"x","provider":"nope"}]"#).unwrap();
        assert!(Catalog::with_file(&path).is_err());
    }
}
