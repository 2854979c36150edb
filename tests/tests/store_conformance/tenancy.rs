//! Tenancy: organizations, workspaces and hashed keys (`TenancyStore`).

use super::*;

conformance!(workspaces_are_idempotent, |store, _clock| async move {
    let a = store.ensure_workspace("acme", "default").await.unwrap();
    let b = store.ensure_workspace("acme", "default").await.unwrap();
    assert_eq!(a, b);
    let other = store.ensure_workspace("acme", "staging").await.unwrap();
    assert_ne!(a.id, other.id);
    assert_eq!(a.organization_id, other.organization_id);
    assert_eq!(store.find_workspace("staging").await.unwrap().unwrap().id, other.id);
    assert_eq!(store.find_workspace(&a.id).await.unwrap().unwrap(), a);
    assert!(store.find_workspace("nope").await.unwrap().is_none());
});

conformance!(api_keys_are_hashed_resolvable_and_revocable, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let secret = "sk-agentd-test-0123456789abcdef";
    let key = store.insert_api_key(&workspace.id, "ci", secret, &KeyKind::Api).await.unwrap();
    assert_eq!(key.hint, "cdef");
    // Storing the same secret again is idempotent.
    assert_eq!(store.insert_api_key(&workspace.id, "ci", secret, &KeyKind::Api).await.unwrap().id, key.id);
    // Environment and runner keys resolve with their kind.
    let env_key = "sk-agentd-env-test-0123456789";
    let environment = KeyKind::Environment("env_01".into());
    store.insert_api_key(&workspace.id, "env", env_key, &environment).await.unwrap();
    assert_eq!(store.resolve_api_key(env_key).await.unwrap().unwrap().kind, environment);
    store.insert_api_key(&workspace.id, "runner", "sk-agentd-runner-test-0123", &KeyKind::Runner).await.unwrap();
    assert_eq!(store.resolve_api_key("sk-agentd-runner-test-0123").await.unwrap().unwrap().kind, KeyKind::Runner);
    let scope = store.resolve_api_key(secret).await.unwrap().expect("key resolves");
    assert_eq!(scope.workspace_id, workspace.id);
    assert_eq!(scope.organization_id, workspace.organization_id);
    assert_eq!(scope.key_id, key.id);
    assert!(store.resolve_api_key("sk-agentd-wrong").await.unwrap().is_none());
    let listed = store.list_api_keys(Some(&workspace.id)).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert!(store.revoke_api_key(&key.id).await.unwrap());
    assert!(!store.revoke_api_key(&key.id).await.unwrap(), "second revoke reports nothing to do");
    assert!(store.resolve_api_key(secret).await.unwrap().is_none(), "a revoked key resolves to nothing");
});
