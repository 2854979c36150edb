//! Sandbox execution policies (`SandboxPolicyStore`): version 1 written once per policy;
//! each next version only on top of the current one, racing writers of one version
//! leaving exactly one; versions never change; bindings pin an exact version and are
//! replaced whole. Every row is seen in its own workspace only.

use agentd_schema::{NewSandboxPolicyVersion, SandboxPolicyVersionRow};
use serde_json::json;

use super::*;

fn version(workspace: &str, id: &str, memory: u64) -> NewSandboxPolicyVersion {
    NewSandboxPolicyVersion {
        workspace_id: workspace.to_owned(),
        policy_id: id.to_owned(),
        config: json!({"isolation": "namespace", "limits": {"memory_bytes": memory}}),
        provisioning: "eager".to_owned(),
        idle_retention: json!(null),
        disabled: false,
    }
}

conformance!(a_policy_is_created_once_at_version_one, |store, clock| async move {
    let first = store.create_sandbox_policy(version("ws_1", "ci", 1)).await.unwrap();
    assert_eq!((first.version, first.created_at_ms, first.disabled), (1, clock.now_ms(), false));
    assert_eq!(first.config["limits"]["memory_bytes"], 1);
    let again = store.create_sandbox_policy(version("ws_1", "ci", 2)).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert_eq!(store.get_sandbox_policy("ws_1", "ci", None).await.unwrap(), Some(first.clone()), "unchanged");
    assert_eq!(store.get_sandbox_policy("ws_2", "ci", None).await.unwrap(), None, "per workspace");
    store.create_sandbox_policy(version("ws_2", "ci", 3)).await.unwrap();
});

conformance!(versions_are_written_on_top_of_the_current_one_and_never_change, |store, clock| async move {
    let first = store.create_sandbox_policy(version("ws_1", "ci", 1)).await.unwrap();
    clock.advance(1_000);
    let mut disabled = version("ws_1", "ci", 2);
    disabled.disabled = true;
    disabled.idle_retention = json!({"mode": "resident"});
    let second = store.add_sandbox_policy_version(disabled, 1).await.unwrap();
    assert_eq!((second.version, second.disabled, second.created_at_ms), (2, true, clock.now_ms()));
    assert_eq!(second.idle_retention, json!({"mode": "resident"}));
    let stale = store.add_sandbox_policy_version(version("ws_1", "ci", 9), 1).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let missing = store.add_sandbox_policy_version(version("ws_1", "nope", 9), 1).await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
    assert_eq!(store.get_sandbox_policy("ws_1", "ci", None).await.unwrap(), Some(second.clone()), "current");
    assert_eq!(store.get_sandbox_policy("ws_1", "ci", Some(1)).await.unwrap(), Some(first), "v1 as written");
    assert_eq!(store.get_sandbox_policy("ws_1", "ci", Some(3)).await.unwrap(), None);
    assert_eq!(store.get_sandbox_policy("ws_2", "ci", Some(1)).await.unwrap(), None);
});

conformance!(racing_writers_of_one_version_leave_exactly_one, |store, _clock| async move {
    store.create_sandbox_policy(version("ws_1", "race", 1)).await.unwrap();
    let writers = (0..8).map(|i| {
        let store = store.clone();
        async move { store.add_sandbox_policy_version(version("ws_1", "race", 100 + i), 1).await }
    });
    let results = futures::future::join_all(writers).await;
    let won: Vec<&SandboxPolicyVersionRow> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| matches!(e, StoreError::Conflict(_))));
    let current = store.get_sandbox_policy("ws_1", "race", None).await.unwrap().unwrap();
    assert_eq!((current.version, &current.config), (2, &won[0].config), "the winner's content is version 2");
});

conformance!(the_list_holds_each_policys_current_version_by_id, |store, _clock| async move {
    for id in ["b", "a", "c"] {
        store.create_sandbox_policy(version("ws_1", id, 1)).await.unwrap();
    }
    store.add_sandbox_policy_version(version("ws_1", "b", 2), 1).await.unwrap();
    store.create_sandbox_policy(version("ws_2", "z", 1)).await.unwrap();
    let page = store.list_sandbox_policies("ws_1", None, 10).await.unwrap();
    let seen: Vec<(&str, i64)> = page.iter().map(|r| (r.policy_id.as_str(), r.version)).collect();
    assert_eq!(seen, [("a", 1), ("b", 2), ("c", 1)]);
    let next = store.list_sandbox_policies("ws_1", Some("a"), 1).await.unwrap();
    assert_eq!(next.iter().map(|r| r.policy_id.as_str()).collect::<Vec<_>>(), ["b"]);
});

conformance!(a_binding_pins_an_exact_version_and_is_replaced_whole, |store, clock| async move {
    assert_eq!(store.sandbox_policy_binding("ws_1", "env_1").await.unwrap(), None);
    let bound = store.bind_sandbox_policy("ws_1", "env_1", "ci", 1).await.unwrap();
    assert_eq!((bound.policy_id.as_str(), bound.version, bound.bound_at_ms), ("ci", 1, clock.now_ms()));
    clock.advance(1_000);
    let rebound = store.bind_sandbox_policy("ws_1", "env_1", "standard", 1).await.unwrap();
    assert_eq!((rebound.policy_id.as_str(), rebound.bound_at_ms), ("standard", clock.now_ms()));
    assert_eq!(store.sandbox_policy_binding("ws_1", "env_1").await.unwrap(), Some(rebound));
    assert_eq!(store.sandbox_policy_binding("ws_2", "env_1").await.unwrap(), None, "per workspace");
});
