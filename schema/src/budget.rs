//! Session budgets: list cost in exact integer arithmetic. One place for the rule, so
//! sessions and (later) deployments share it.
//!
//! Prices are micro-USD per million tokens (`catalog::Prices`). The cost of a usage is
//! kept as the exact product sum Σ tokens × price, in units of 10⁻¹² USD ("pico-USD"
//! per token·price unit): one cent is 10¹⁰ of those units. Server tool requests
//! (`web_search`, `web_fetch`) are priced in micro-USD per request, so each adds
//! price × 10⁶ units. Nothing is rounded until a figure is shown, and then always down.

use serde_json::{Value, json};

use crate::catalog::Prices;

/// Units of the exact cost sum per US cent.
const UNITS_PER_CENT: u128 = 10_000_000_000;

/// Token counts of a usage (cumulative or per request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Prompt-cache reads.
    pub cache_read: u64,
    /// Prompt-cache writes.
    pub cache_write: u64,
}

impl Tokens {
    /// Reads a session `usage` object (the store's projection).
    pub fn from_usage(usage: &Value) -> Self {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        Self {
            input: n(&usage["input_tokens"]),
            output: n(&usage["output_tokens"]),
            cache_read: n(&usage["cache_read_input_tokens"]),
            cache_write: n(&usage["cache_creation"]["ephemeral_5m_input_tokens"])
                + n(&usage["cache_creation"]["ephemeral_1h_input_tokens"]),
        }
    }

    /// These tokens less `other` (never below zero).
    fn less(self, other: Tokens) -> Self {
        Self {
            input: self.input.saturating_sub(other.input),
            output: self.output.saturating_sub(other.output),
            cache_read: self.cache_read.saturating_sub(other.cache_read),
            cache_write: self.cache_write.saturating_sub(other.cache_write),
        }
    }
}

/// The exact cost of `tokens` at `prices`, in units of 10⁻¹² USD.
pub fn cost_units(tokens: Tokens, prices: Prices) -> u128 {
    u128::from(tokens.input) * u128::from(prices.input)
        + u128::from(tokens.output) * u128::from(prices.output)
        + u128::from(tokens.cache_read) * u128::from(prices.cache_read)
        + u128::from(tokens.cache_write) * u128::from(prices.cache_write)
}

/// The exact cost of `fetches` web fetches and `searches` web searches at `prices`, in
/// the same units as [`cost_units`].
pub fn server_tool_units(fetches: u64, searches: u64, prices: Prices) -> u128 {
    const UNITS_PER_MICRO_USD: u128 = 1_000_000;
    (u128::from(fetches) * u128::from(prices.web_fetch_per_request)
        + u128::from(searches) * u128::from(prices.web_search_per_request))
        * UNITS_PER_MICRO_USD
}

/// A cost in whole cents, rounded down (never overstates what was spent).
pub fn cents(units: u128) -> u128 {
    units / UNITS_PER_CENT
}

/// The ceiling of a `{"type":"limit","max_list_cost":{"amount":…}}` budget, in cents.
pub fn ceiling_cents(budget: &Value) -> Option<u128> {
    budget["max_list_cost"]["amount"].as_str().and_then(|amount| amount.parse().ok())
}

/// Whether the spend `units` has reached a ceiling of `ceiling_cents`.
pub fn reached(units: u128, ceiling_cents: u128) -> bool {
    units >= ceiling_cents.saturating_mul(UNITS_PER_CENT)
}

/// The wire `BetaMonetaryAmount` of a spend.
pub fn list_cost(units: u128) -> Value {
    json!({ "amount": cents(units).to_string(), "currency": "USD" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_of_another_model_are_priced_at_that_models_prices() {
        let prices = |input: u64| json!({ "input": input, "output": 0 });
        let body = json!({
            "_price_snapshot": { "model": "a", "prices": prices(3_000_000), "models": { "b": prices(5_000_000) } },
        });
        let usage = json!({ "input_tokens": 1_200_000, "_models": { "b": { "input_tokens": 1_000_000 } } });
        // 200k at $3 + 1M at $5 = $5.60.
        assert_eq!(Standing::of(&body, &usage).list_cost(), json!({ "amount": "560", "currency": "USD" }));
        let unpriced = json!({ "input_tokens": 10, "_models": { "c": { "input_tokens": 10 } } });
        assert_eq!(
            Standing::of(&body, &unpriced).spent_units,
            None,
            "a model without a price leaves the spend unknown"
        );
        assert_eq!(Standing::of(&body, &json!({ "input_tokens": 1_000_000 })).list_cost()["amount"], "300");
    }

    fn prices() -> Prices {
        // $3 / $15 per million tokens, cache read $0.30, cache write $3.75; a search 1¢.
        Prices {
            input: 3_000_000,
            output: 15_000_000,
            cache_read: 300_000,
            cache_write: 3_750_000,
            web_search_per_request: 10_000,
            web_fetch_per_request: 0,
        }
    }

    #[test]
    fn a_hundred_searches_cost_a_dollar_and_fetches_only_their_price() {
        assert_eq!(cents(server_tool_units(0, 100, prices())), 100);
        assert_eq!(server_tool_units(1_000, 0, prices()), 0);
        let priced_fetch = Prices { web_fetch_per_request: 2_500, ..prices() };
        assert_eq!(server_tool_units(4, 0, priced_fetch), 10_000 * 1_000_000, "4 × $0.0025 = 1¢");
    }

    #[test]
    fn standing_adds_the_server_tools_to_the_tokens() {
        let body = json!({
            "budget": { "type": "limit", "max_list_cost": { "amount": "5", "currency": "USD" } },
            "_price_snapshot": snapshot(crate::catalog::current(), "claude-sonnet-4-6"),
        });
        let usage = json!({ "input_tokens": 1_000_000, "server_tool_use": { "web_search_requests": 2 } });
        let standing = Standing::of(&body, &usage);
        assert_eq!(standing.list_cost()["amount"], "302", "$3 of input and two 1¢ searches");
        assert!(standing.reached());
        // A snapshot frozen before server tools were priced counts them at nothing.
        let mut old = body.clone();
        old["_price_snapshot"]["prices"].as_object_mut().unwrap().remove("web_search_per_request");
        assert_eq!(Standing::of(&old, &usage).list_cost()["amount"], "300");
    }

    #[test]
    fn a_million_input_tokens_cost_the_list_price_exactly() {
        let units = cost_units(Tokens { input: 1_000_000, ..Tokens::default() }, prices());
        assert_eq!(cents(units), 300);
        assert!(reached(units, 300));
        assert!(!reached(units - 1, 300));
    }

    /// A small deterministic generator, so the property runs the same everywhere.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, bound: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % bound
        }
    }

    /// Random usage sequences, reconciled after every request as the worker does: the
    /// ceiling is detected at the first request that reaches it (so the spend never
    /// overshoots by more than that one request), `budget_reached` fires exactly once,
    /// and the cumulative sum equals the sum of the parts (no rounding drift).
    #[test]
    fn reconciliation_never_overshoots_by_more_than_one_request_and_fires_once() {
        let mut rng = Lcg(42);
        for _ in 0..2_000 {
            let ceiling = 1 + rng.next(5_000) as u128;
            let mut cumulative = Tokens::default();
            let mut parts = 0u128;
            let mut fired = 0;
            let mut admitted_after_reached = 0;
            for _ in 0..200 {
                if reached(cost_units(cumulative, prices()), ceiling) {
                    // The loop admits no further model request once reached.
                    admitted_after_reached += 1;
                    break;
                }
                let request = Tokens {
                    input: rng.next(50_000),
                    output: rng.next(8_000),
                    cache_read: rng.next(100_000),
                    cache_write: rng.next(20_000),
                };
                let before = cost_units(cumulative, prices());
                cumulative = Tokens {
                    input: cumulative.input + request.input,
                    output: cumulative.output + request.output,
                    cache_read: cumulative.cache_read + request.cache_read,
                    cache_write: cumulative.cache_write + request.cache_write,
                };
                let this_request = cost_units(request, prices());
                parts += this_request;
                let after = cost_units(cumulative, prices());
                assert_eq!(after, before + this_request);
                if !reached(before, ceiling) && reached(after, ceiling) {
                    fired += 1;
                    // Overshoot is bounded by the request that crossed the ceiling.
                    assert!(after - ceiling * UNITS_PER_CENT <= this_request);
                }
            }
            assert_eq!(parts, cost_units(cumulative, prices()));
            assert!(fired <= 1, "budget_reached fired {fired} times");
            assert!(admitted_after_reached <= 1);
        }
    }
}

/// The price snapshot frozen into a session at creation from its workspace's effective
/// catalog (`Null` for unpriced models). Later price changes never reach it.
pub fn snapshot(catalog: &crate::catalog::Catalog, model: &str) -> Value {
    match catalog.find(model).and_then(|m| m.prices) {
        Some(p) => json!({
            "model": model,
            "prices": {
                "input": p.input,
                "output": p.output,
                "cache_read": p.cache_read,
                "cache_write": p.cache_write,
                "web_search_per_request": p.web_search_per_request,
                "web_fetch_per_request": p.web_fetch_per_request,
            },
        }),
        None => Value::Null,
    }
}

fn snapshot_prices(snapshot: &Value) -> Option<Prices> {
    prices_of(&snapshot["prices"])
}

fn prices_of(p: &Value) -> Option<Prices> {
    Some(Prices {
        input: p["input"].as_u64()?,
        output: p["output"].as_u64()?,
        cache_read: p["cache_read"].as_u64().unwrap_or(0),
        cache_write: p["cache_write"].as_u64().unwrap_or(0),
        web_search_per_request: p["web_search_per_request"].as_u64().unwrap_or(0),
        web_fetch_per_request: p["web_fetch_per_request"].as_u64().unwrap_or(0),
    })
}

/// Where a session stands against its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Exact spend so far, if the session's model is priced.
    pub spent_units: Option<u128>,
    /// The ceiling in cents, if a budget is set.
    pub ceiling_cents: Option<u128>,
}

impl Standing {
    /// A session's standing from its stored body (budget, `_price_snapshot`) and usage:
    /// its tokens and its server tool requests (`usage.server_tool_use`).
    ///
    /// In a multiagent session the tokens a thread spent on another model than the
    /// primary's are also kept per model (`usage._models`, ADR 0022 §7): those are priced
    /// at that model's prices of the snapshot (`_price_snapshot.models`), the rest at the
    /// primary's. A model without a price there leaves the spend unknown.
    pub fn of(body: &Value, usage: &Value) -> Self {
        let (fetches, searches) = crate::web::server_tool_counts(usage);
        let snapshot = &body["_price_snapshot"];
        let spent_units = snapshot_prices(snapshot).and_then(|primary| {
            let mut rest = Tokens::from_usage(usage);
            let mut units = server_tool_units(fetches, searches, primary);
            for (model, spent) in usage[crate::events::MODELS_KEY].as_object().into_iter().flatten() {
                let tokens = Tokens::from_usage(spent);
                units += cost_units(tokens, prices_of(&snapshot["models"][model])?);
                rest = rest.less(tokens);
            }
            Some(units + cost_units(rest, primary))
        });
        Self { spent_units, ceiling_cents: ceiling_cents(&body["budget"]) }
    }

    /// True when a budget is set and the spend has reached it. A budgeted session
    /// without a price can never be admitted (it was rejected at creation).
    pub fn reached(&self) -> bool {
        match (self.ceiling_cents, self.spent_units) {
            (Some(ceiling), Some(spent)) => reached(spent, ceiling),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The wire `list_cost`, when priced.
    pub fn list_cost(&self) -> Value {
        self.spent_units.map_or(Value::Null, list_cost)
    }
}
