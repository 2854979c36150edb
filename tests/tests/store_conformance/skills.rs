//! Skills and their versions (`SkillStore`).

use agentd_schema::store::{NewSkill, NewSkillVersion, SkillQuery};

use super::*;

fn version(id: &str, name: &str) -> NewSkillVersion {
    NewSkillVersion {
        id: id.to_owned(),
        name: name.to_owned(),
        description: format!("{name} at {id}"),
        files: json!([{ "path": "SKILL.md", "size": 10 }]),
        blob_key: format!("skills/ws/{name}/{id}"),
    }
}

fn new_skill(workspace: &str, name: &str, version_id: &str) -> NewSkill {
    NewSkill {
        id: agentd_schema::ids::new_id("skill"),
        workspace_id: workspace.to_owned(),
        display_name: format!("The {name}"),
        version: version(version_id, name),
    }
}

fn page(limit: i64, before: Option<&str>) -> SkillQuery {
    SkillQuery { source: None, before_id: before.map(str::to_owned), limit }
}

conformance!(a_skill_is_created_with_its_first_version, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let (skill, first) = store.create_skill(new_skill(&ws, "pdf-tools", "1700000000000000")).await.unwrap();
    assert_eq!((skill.name.as_str(), skill.display_name.as_str()), ("pdf-tools", "The pdf-tools"));
    assert_eq!(skill.source, "custom");
    assert_eq!(skill.latest_version_id, "1700000000000000");
    assert_eq!(skill.created_at_ms, clock.now_ms());
    assert_eq!((first.skill_id.as_str(), first.id.as_str()), (skill.id.as_str(), "1700000000000000"));
    assert_eq!(first.files, json!([{ "path": "SKILL.md", "size": 10 }]));
    assert_eq!(first.blob_key, "skills/ws/pdf-tools/1700000000000000");
    assert_eq!(store.get_skill(&ws, &skill.id).await.unwrap(), Some(skill.clone()));
    assert_eq!(store.get_skill_version(&ws, &skill.id, &first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(store.get_skill_version(&ws, &skill.id, "latest").await.unwrap(), Some(first));
    assert!(store.get_skill(&ws, "skill_missing").await.unwrap().is_none());
});

conformance!(names_are_unique_per_workspace, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    store.create_skill(new_skill(&ws, "pdf-tools", "1")).await.unwrap();
    let taken = store.create_skill(new_skill(&ws, "pdf-tools", "2")).await.unwrap_err();
    assert!(matches!(taken, StoreError::Conflict(_)), "{taken:?}");
    assert_eq!(store.list_skills(&ws, &page(10, None)).await.unwrap().len(), 1, "nothing of the refused skill stays");
    // Another workspace may use the name.
    store.create_skill(new_skill(&other, "pdf-tools", "3")).await.unwrap();
});

conformance!(versions_advance_latest_and_ids_only_increase, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let (skill, _) = store.create_skill(new_skill(&ws, "pdf", "1700000000000005")).await.unwrap();
    clock.advance(10);
    // A proposed id at or below the latest (a clock that did not move) is raised past it.
    let second = store.add_skill_version(&ws, &skill.id, version("1700000000000005", "pdf")).await.unwrap().unwrap();
    assert_eq!(second.id, "1700000000000006");
    let third = store.add_skill_version(&ws, &skill.id, version("1700000000000100", "pdf")).await.unwrap().unwrap();
    assert_eq!(third.id, "1700000000000100");
    let latest = store.get_skill(&ws, &skill.id).await.unwrap().unwrap();
    assert_eq!(latest.latest_version_id, third.id);
    assert_eq!(latest.updated_at_ms, clock.now_ms());
    assert_eq!(store.get_skill_version(&ws, &skill.id, "latest").await.unwrap().unwrap().id, third.id);
    // A version of another name is refused; one of a missing skill is `None`.
    let renamed = store.add_skill_version(&ws, &skill.id, version("1800000000000000", "other")).await.unwrap_err();
    assert!(matches!(renamed, StoreError::Conflict(_)), "{renamed:?}");
    assert!(store.add_skill_version(&ws, "skill_missing", version("1", "pdf")).await.unwrap().is_none());

    let ids = |rows: Vec<agentd_schema::store::SkillVersionRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let all = ids(store.list_skill_versions(&ws, &skill.id, &page(10, None)).await.unwrap());
    assert_eq!(all, ["1700000000000100", "1700000000000006", "1700000000000005"]);
    let first_page = ids(store.list_skill_versions(&ws, &skill.id, &page(2, None)).await.unwrap());
    assert_eq!(first_page, all[..2]);
    let rest = ids(store.list_skill_versions(&ws, &skill.id, &page(2, Some(&first_page[1]))).await.unwrap());
    assert_eq!(rest, all[2..]);
});

conformance!(deleting_versions_keeps_one_and_moves_latest, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let (skill, first) = store.create_skill(new_skill(&ws, "pdf", "100")).await.unwrap();
    let second = store.add_skill_version(&ws, &skill.id, version("200", "pdf")).await.unwrap().unwrap();
    let removed = store.delete_skill_version(&ws, &skill.id, &second.id).await.unwrap().unwrap();
    assert_eq!(removed.blob_key, second.blob_key);
    assert_eq!(store.get_skill(&ws, &skill.id).await.unwrap().unwrap().latest_version_id, first.id);
    assert!(store.delete_skill_version(&ws, &skill.id, &second.id).await.unwrap().is_none());
    // The only version stays: a skill holds at least one.
    let last = store.delete_skill_version(&ws, &skill.id, &first.id).await.unwrap_err();
    assert!(matches!(last, StoreError::Conflict(_)), "{last:?}");
    assert!(store.get_skill_version(&ws, &skill.id, &first.id).await.unwrap().is_some(), "rolled back");

    let third = store.add_skill_version(&ws, &skill.id, version("300", "pdf")).await.unwrap().unwrap();
    let mut keys = store.delete_skill(&ws, &skill.id).await.unwrap().expect("the skill existed");
    keys.sort();
    assert_eq!(keys, [first.blob_key, third.blob_key]);
    assert!(store.get_skill(&ws, &skill.id).await.unwrap().is_none());
    assert!(store.get_skill_version(&ws, &skill.id, "latest").await.unwrap().is_none());
    assert!(store.delete_skill(&ws, &skill.id).await.unwrap().is_none());
    // The name is free again.
    store.create_skill(new_skill(&ws, "pdf", "400")).await.unwrap();
});

conformance!(skills_list_newest_first_by_source, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(store.create_skill(new_skill(&ws, &format!("skill-{i}"), "1")).await.unwrap().0.id);
    }
    made.sort();
    made.reverse();
    let ids = |rows: Vec<agentd_schema::store::SkillRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list_skills(&ws, &page(10, None)).await.unwrap()), made);
    let first = ids(store.list_skills(&ws, &page(2, None)).await.unwrap());
    assert_eq!(first, made[..2]);
    let second = ids(store.list_skills(&ws, &page(2, Some(&first[1]))).await.unwrap());
    assert_eq!(second, made[2..4]);
    let custom = SkillQuery { source: Some("custom".into()), ..page(10, None) };
    assert_eq!(ids(store.list_skills(&ws, &custom).await.unwrap()), made);
    let anthropic = SkillQuery { source: Some("anthropic".into()), ..page(10, None) };
    assert!(store.list_skills(&ws, &anthropic).await.unwrap().is_empty());
});

conformance!(skills_are_invisible_across_workspaces, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    let (skill, first) = store.create_skill(new_skill(&ws, "pdf", "100")).await.unwrap();
    assert!(store.get_skill(&other, &skill.id).await.unwrap().is_none());
    assert!(store.get_skill_version(&other, &skill.id, "latest").await.unwrap().is_none());
    assert!(store.get_skill_version(&other, &skill.id, &first.id).await.unwrap().is_none());
    assert!(store.list_skills(&other, &page(10, None)).await.unwrap().is_empty());
    assert!(store.list_skill_versions(&other, &skill.id, &page(10, None)).await.unwrap().is_empty());
    assert!(store.add_skill_version(&other, &skill.id, version("200", "pdf")).await.unwrap().is_none());
    assert!(store.delete_skill_version(&other, &skill.id, &first.id).await.unwrap().is_none());
    assert!(store.delete_skill(&other, &skill.id).await.unwrap().is_none());
    assert_eq!(store.get_skill(&ws, &skill.id).await.unwrap().unwrap().latest_version_id, first.id);
    assert_eq!(store.list_skill_versions(&ws, &skill.id, &page(10, None)).await.unwrap().len(), 1);
});
