//! A skill version's archive in the object store follows its rows: written with the
//! version, gone with it, and never left behind by a refused upload (docs/api/skills.md,
//! "Storage"). Driven through `domain::skills` on the in-process gateway's filesystem
//! blobs, whose directory the test counts.

use std::path::Path;

use agentd_gateway::domain::DomainError;
use agentd_gateway::domain::skills::{self, UploadedFile};
use agentd_schema::blobs::BlobKey;
use agentd_tests::gateway::TestGateway;

fn upload(dir: &str, name: &str, extra: &[(&str, &str)]) -> Vec<UploadedFile> {
    let mut files = vec![UploadedFile {
        path: format!("{dir}/SKILL.md"),
        bytes: format!("---\nname: {name}\ndescription: d\n---\n").into(),
    }];
    for (path, text) in extra {
        files.push(UploadedFile { path: format!("{dir}/{path}"), bytes: text.to_string().into() });
    }
    files
}

/// Every object under `dir`.
fn objects(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().map(|entry| if entry.path().is_dir() { objects(&entry.path()) } else { 1 }).sum()
}

#[tokio::test]
async fn archives_follow_their_versions() {
    let gateway = TestGateway::new().await;
    let (workspace, _key) = gateway.workspace("skill-objects").await;
    let store = gateway.state.backends.store.as_ref();
    let blobs = &gateway.state.backends.blobs;
    let root = Path::new(blobs.location()).to_owned();

    let (skill, first) =
        skills::create(store, blobs, &workspace, None, upload("dir", "pdf", &[("a.txt", "a")])).await.unwrap();
    let key = BlobKey::skill_version(&workspace, &skill.id, &first.id);
    assert_eq!(first.blob_key, key.as_str());
    assert!(blobs.exists(&key).await.unwrap());
    assert_eq!(objects(&root), 1);

    // Refused after the archive was written: the name is taken, or a version renames the
    // skill. Nothing stays.
    let taken = skills::create(store, blobs, &workspace, None, upload("other", "pdf", &[])).await.unwrap_err();
    assert!(matches!(taken, DomainError::NameTaken(_)), "{taken:?}");
    let renamed = skills::add_version(store, blobs, &workspace, &skill.id, upload("dir", "pdf-2", &[])).await;
    assert!(matches!(renamed, Err(DomainError::Invalid { .. })), "{renamed:?}");
    assert_eq!(objects(&root), 1, "a refused upload leaves no object");

    let second = skills::add_version(store, blobs, &workspace, &skill.id, upload("dir", "pdf", &[])).await.unwrap();
    assert_eq!(objects(&root), 2);
    let third = skills::add_version(store, blobs, &workspace, &skill.id, upload("dir", "pdf", &[])).await.unwrap();
    assert_eq!(objects(&root), 3);
    skills::delete_version(store, blobs, &workspace, &skill.id, &second.id).await.unwrap();
    assert!(!blobs.exists(&BlobKey::from_stored(&second.blob_key)).await.unwrap());
    assert_eq!(objects(&root), 2);
    assert_eq!(skills::file(store, blobs, &workspace, &skill.id, &first.id, "a.txt").await.unwrap(), "a");

    skills::delete(store, blobs, &workspace, &skill.id).await.unwrap();
    for gone in [&first, &third] {
        assert!(!blobs.exists(&BlobKey::from_stored(&gone.blob_key)).await.unwrap());
    }
    assert_eq!(objects(&root), 0, "deleting the skill removes every archive");
    gateway.cleanup().await;
}
