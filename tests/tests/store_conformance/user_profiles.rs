//! User profiles (`UserProfileStore`): fields written whole by a compare-and-swap on the
//! revision, consent answers as one UPDATE each, tombstones, and the list orders.

use agentd_schema::capture::{Consent, Level, Purpose};
use agentd_schema::ids::new_id;
use agentd_schema::store::{
    AccessType, AccountStatus, ExternalUserDetails, NewUserProfile, UserProfileCursor, UserProfileFields,
    UserProfileOrder, UserProfileQuery, UserProfileRow,
};

use super::*;

fn fields(name: Option<&str>) -> UserProfileFields {
    UserProfileFields {
        name: name.map(str::to_owned),
        access_type: AccessType::Application,
        external: ExternalUserDetails::default(),
        metadata: json!({ "k": "v" }),
    }
}

async fn profile(store: &dyn Store, ws: &str, name: Option<&str>) -> UserProfileRow {
    store
        .insert_user_profile(NewUserProfile {
            id: new_id("uprof"),
            workspace_id: ws.to_owned(),
            organization_id: "org_1".into(),
            fields: fields(name),
        })
        .await
        .unwrap()
}

async fn workspace(store: &dyn Store) -> String {
    store.ensure_workspace("acme", "default").await.unwrap().id
}

conformance!(a_profile_is_written_read_updated_by_revision_and_deleted_as_a_tombstone, |store, clock| async move {
    let ws = workspace(store.as_ref()).await;
    let created = profile(store.as_ref(), &ws, Some("Ada")).await;
    assert_eq!((created.revision, created.deleted_at_ms, created.consent), (1, None, Consent::default()));
    assert_eq!(created.created_at_ms, created.updated_at_ms);
    assert_eq!(created.organization_id, "org_1");
    assert_eq!(store.get_user_profile(&ws, &created.id).await.unwrap(), Some(created.clone()));
    assert_eq!(store.get_user_profile("another", &created.id).await.unwrap(), None, "another workspace sees nothing");

    // Every field round-trips.
    clock.advance(1_000);
    let mut next = fields(Some("Ada L."));
    next.access_type = AccessType::Passthrough;
    next.external = ExternalUserDetails {
        reference_id: Some("u-1".into()),
        onboarded_at_ms: Some(1_600_000_000_123),
        account_status: Some(AccountStatus::Suspended),
        country: Some("GB".into()),
        email_hash: Some("e".into()),
        entity_type: Some(agentd_schema::store::EntityType::Government),
        name_hash: Some("n".into()),
    };
    next.metadata = json!({ "a": "1", "b": "2" });
    let updated = store.update_user_profile(&ws, &created.id, 1, next.clone()).await.unwrap().unwrap();
    assert_eq!((updated.fields.clone(), updated.revision), (next.clone(), 2));
    assert_eq!(updated.updated_at_ms, created.created_at_ms + 1_000);
    assert_eq!(store.get_user_profile(&ws, &created.id).await.unwrap(), Some(updated.clone()));

    // A write from a stale read changes nothing.
    let stale = store.update_user_profile(&ws, &created.id, 1, fields(Some("lost"))).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    assert_eq!(store.get_user_profile(&ws, &created.id).await.unwrap().unwrap().fields, next);
    assert_eq!(store.update_user_profile(&ws, &new_id("uprof"), 1, fields(None)).await.unwrap(), None);

    // Deleted: a tombstone found by id (erasure still finds the subject), holding no
    // personal data, changed by nothing.
    clock.advance(1_000);
    let deleted = store.delete_user_profile(&ws, &created.id).await.unwrap().unwrap();
    assert_eq!(deleted.deleted_at_ms, Some(created.created_at_ms + 2_000));
    let found = store.get_user_profile(&ws, &created.id).await.unwrap().unwrap();
    let blank = UserProfileFields {
        name: None,
        access_type: next.access_type,
        external: ExternalUserDetails::default(),
        metadata: json!({}),
    };
    assert_eq!((found.deleted_at_ms, found.fields), (deleted.deleted_at_ms, blank));
    assert_eq!(store.delete_user_profile(&ws, &created.id).await.unwrap(), None, "deleted once");
    assert_eq!(store.update_user_profile(&ws, &created.id, deleted.revision, fields(None)).await.unwrap(), None);
    let answer = store.set_user_profile_consent(&ws, &created.id, Purpose::ConversationContent, true).await;
    assert_eq!(answer.unwrap(), None);
    assert_eq!(store.delete_user_profile("another", &created.id).await.unwrap(), None);
});

conformance!(consent_answers_are_kept_per_purpose_and_move_the_revision, |store, clock| async move {
    let ws = workspace(store.as_ref()).await;
    let created = profile(store.as_ref(), &ws, None).await;
    clock.advance(500);
    let granted =
        store.set_user_profile_consent(&ws, &created.id, Purpose::ConversationContent, true).await.unwrap().unwrap();
    assert_eq!(granted.consent, Consent { conversation_content: Some(true), activity_record: None });
    assert_eq!(granted.consent.bound(), Level::Full);
    let at = created.created_at_ms + 500;
    assert_eq!(granted.consent_at_ms.get(Purpose::ConversationContent), Some(at));
    assert_eq!(granted.consent_at_ms.get(Purpose::ActivityRecord), None);
    assert_eq!((granted.revision, granted.updated_at_ms), (2, at));
    assert_eq!(granted.fields, created.fields, "the fields are untouched");

    // A field update computed before the answer is refused, so it cannot undo it; one
    // from a fresh read keeps it.
    let stale = store.update_user_profile(&ws, &created.id, created.revision, fields(Some("x"))).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let renamed = store.update_user_profile(&ws, &created.id, granted.revision, fields(Some("x"))).await.unwrap();
    assert_eq!(renamed.unwrap().consent, granted.consent);

    clock.advance(500);
    let withdrawn =
        store.set_user_profile_consent(&ws, &created.id, Purpose::ActivityRecord, false).await.unwrap().unwrap();
    assert_eq!(withdrawn.consent, Consent { conversation_content: Some(true), activity_record: Some(false) });
    assert_eq!(withdrawn.consent.bound(), Level::Off);
    assert_eq!(withdrawn.consent_at_ms.get(Purpose::ActivityRecord), Some(at + 500));
    assert_eq!(withdrawn.consent_at_ms.get(Purpose::ConversationContent), Some(at), "the other purpose's time");
    let changed =
        store.set_user_profile_consent(&ws, &created.id, Purpose::ConversationContent, false).await.unwrap().unwrap();
    assert_eq!(changed.consent.conversation_content, Some(false));
    let read = store.get_user_profile(&ws, &created.id).await.unwrap().unwrap();
    assert_eq!((read.consent, read.consent_at_ms), (changed.consent, changed.consent_at_ms));
    assert_eq!(
        store.set_user_profile_consent("another", &created.id, Purpose::ActivityRecord, true).await.unwrap(),
        None
    );
});

/// Every page of a listing, `per_page` at a time, as names (or ids of nameless ones).
async fn walk(store: &dyn Store, ws: &str, order_by: UserProfileOrder, descending: bool, per_page: i64) -> Vec<String> {
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let query = UserProfileQuery { order_by, descending, after: after.clone(), limit: per_page };
        let page = store.list_user_profiles(ws, &query).await.unwrap();
        for row in &page {
            seen.push(row.fields.name.clone().unwrap_or_else(|| row.id.clone()));
        }
        match page.last() {
            Some(last) if page.len() as i64 == per_page => {
                after = Some(UserProfileCursor { id: last.id.clone(), name_key: last.name_key() });
            }
            _ => return seen,
        }
    }
}

conformance!(lists_order_by_creation_or_name_with_nameless_last_and_page_by_cursor, |store, clock| async move {
    let ws = workspace(store.as_ref()).await;
    let mut ids = Vec::new();
    for name in [Some("bob"), None, Some("Alice"), Some("carol"), None, Some("alice"), Some("Émile"), Some("_x")] {
        clock.advance(10);
        ids.push(profile(store.as_ref(), &ws, name).await);
    }
    let gone = profile(store.as_ref(), &ws, Some("aaa deleted")).await;
    store.delete_user_profile(&ws, &gone.id).await.unwrap();
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    profile(store.as_ref(), &other, Some("aardvark")).await;
    let (nameless_1, nameless_2) = (ids[1].id.clone(), ids[4].id.clone());

    // By creation (the id order): newest first by default, both directions, any page size.
    let oldest_first: Vec<String> =
        ids.iter().map(|row| row.fields.name.clone().unwrap_or_else(|| row.id.clone())).collect();
    let newest_first: Vec<String> = oldest_first.iter().rev().cloned().collect();
    for per_page in [1, 3, 100] {
        assert_eq!(walk(store.as_ref(), &ws, UserProfileOrder::CreatedAt, true, per_page).await, newest_first);
        assert_eq!(walk(store.as_ref(), &ws, UserProfileOrder::CreatedAt, false, per_page).await, oldest_first);
    }

    // By name: ASCII case folded, compared byte by byte ("_" before letters, "É" after
    // them), equal keys by id; nameless last in either direction.
    let (alice_upper, alice_lower) = ("Alice".to_owned(), "alice".to_owned());
    let ascending: Vec<String> = vec![
        "_x".into(),
        alice_upper.clone(),
        alice_lower.clone(),
        "bob".into(),
        "carol".into(),
        "Émile".into(),
        nameless_1.clone(),
        nameless_2.clone(),
    ];
    let descending: Vec<String> = vec![
        "Émile".into(),
        "carol".into(),
        "bob".into(),
        alice_lower,
        alice_upper,
        "_x".into(),
        nameless_2,
        nameless_1,
    ];
    for per_page in [1, 2, 3, 5, 100] {
        assert_eq!(walk(store.as_ref(), &ws, UserProfileOrder::Name, false, per_page).await, ascending, "{per_page}");
        assert_eq!(walk(store.as_ref(), &ws, UserProfileOrder::Name, true, per_page).await, descending, "{per_page}");
    }
});
