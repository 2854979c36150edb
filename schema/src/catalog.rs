//! The model catalog: which model ids exist, how they are described to clients, and
//! their list prices (the budget's price snapshot is frozen from here at session
//! creation).

use serde_json::{Value, json};

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Model id, e.g. `claude-sonnet-4-5`.
    pub id: &'static str,
    /// Human-readable name.
    pub display_name: &'static str,
    /// Model line (`opus`, `sonnet`, `haiku`).
    pub line: &'static str,
    /// Release date, RFC 3339.
    pub created_at: &'static str,
    /// Context window.
    pub max_input_tokens: u64,
    /// Maximum `max_tokens`.
    pub max_tokens: u64,
    /// Effort level used when an agent does not choose one.
    pub default_effort: &'static str,
    /// List price per million input tokens, in USD cents.
    pub input_cents_per_mtok: u64,
    /// List price per million output tokens, in USD cents.
    pub output_cents_per_mtok: u64,
}

impl Model {
    /// The `model` object of the Models API.
    pub fn to_wire(&self) -> Value {
        let yes = json!({ "supported": true });
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
                "batch": { "supported": false },
                "citations": yes,
                "code_execution": { "supported": false },
                "context_management": { "supported": false },
                "effort": {
                    "supported": true, "low": yes, "medium": yes, "high": yes, "max": yes, "xhigh": { "supported": false }
                },
                "image_input": yes,
                "pdf_input": yes,
                "server_tools": { "supported": false, "code_execution": { "supported": false }, "web_search": { "supported": false } },
                "structured_outputs": yes,
                "thinking": {
                    "supported": true,
                    "types": {
                        "adaptive": yes,
                        "between_tools": { "supported": false },
                        "disabled": yes,
                        "enabled": yes
                    }
                }
            }
        })
    }
}

/// The built-in catalog, newest first (the Models API lists newest first).
pub const BUILT_IN: &[Model] = &[
    Model {
        id: "claude-opus-4-6",
        display_name: "Claude Opus 4.6",
        line: "opus",
        created_at: "2026-02-05T00:00:00Z",
        max_input_tokens: 200_000,
        max_tokens: 128_000,
        default_effort: "high",
        input_cents_per_mtok: 500,
        output_cents_per_mtok: 2_500,
    },
    Model {
        id: "claude-sonnet-4-6",
        display_name: "Claude Sonnet 4.6",
        line: "sonnet",
        created_at: "2026-02-17T00:00:00Z",
        max_input_tokens: 200_000,
        max_tokens: 64_000,
        default_effort: "high",
        input_cents_per_mtok: 300,
        output_cents_per_mtok: 1_500,
    },
    Model {
        id: "claude-sonnet-4-5",
        display_name: "Claude Sonnet 4.5",
        line: "sonnet",
        created_at: "2025-09-29T00:00:00Z",
        max_input_tokens: 200_000,
        max_tokens: 64_000,
        default_effort: "high",
        input_cents_per_mtok: 300,
        output_cents_per_mtok: 1_500,
    },
    Model {
        id: "claude-haiku-4-5",
        display_name: "Claude Haiku 4.5",
        line: "haiku",
        created_at: "2025-10-01T00:00:00Z",
        max_input_tokens: 200_000,
        max_tokens: 64_000,
        default_effort: "high",
        input_cents_per_mtok: 100,
        output_cents_per_mtok: 500,
    },
];

/// Looks a model up in the built-in catalog.
pub fn find(id: &str) -> Option<&'static Model> {
    BUILT_IN.iter().find(|model| model.id == id)
}
