//! agentd's own data directory (`AGENTD_DATA_DIR`): `0700`, and the embedded database with
//! its WAL and shared-memory files `0600`, whoever created them and with whatever umask.
//! SQLite gives `-wal`, `-shm` and `-journal` files the mode of the database file, so the
//! database is created `0600` before SQLite first opens it.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The embedded database's file name.
pub const DATABASE: &str = "agentd.db";

/// Creates (or tightens) the data directory and its database files; returns the database path.
pub fn prepare(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the data directory {} (check AGENTD_DATA_DIR)", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make the data directory {} private (0700)", dir.display()))?;
    let database = dir.join(DATABASE);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&database)
        .with_context(|| format!("cannot create {}", database.display()))?;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let path = dir.join(format!("{DATABASE}{suffix}"));
        if path.exists() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("cannot make {} private (0600)", path.display()))?;
        }
    }
    Ok(database)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_directory_is_private_and_the_database_too() {
        let parent = std::env::temp_dir().join(format!("agentd-data-dir-test-{}", std::process::id()));
        let dir = parent.join("data");
        let database = super::prepare(&dir).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&database), 0o600);
        // Files a previous version left readable are tightened.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("agentd.db-wal"), "").unwrap();
        std::fs::set_permissions(dir.join("agentd.db-wal"), std::fs::Permissions::from_mode(0o644)).unwrap();
        super::prepare(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("agentd.db-wal")), 0o600);
        std::fs::remove_dir_all(parent).unwrap();
    }
}
