//! Data files are private: the real server tightens a data directory it finds world-readable
//! (the harness creates it with the umask's 0755) and creates every file 0600.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::support::TestServer;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn the_data_dir_is_0700_and_every_file_in_it_0600() {
    let mut server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.send("q", json!({ "body": "private" })).await;
    server.kill().await;
    // A crash leaves the WAL behind; the restart finds it and the database.
    server.restart().await;
    server.send("q", json!({ "body": "private too" })).await;
    let dir = server.data_dir();
    assert_eq!(mode(&dir), 0o700);
    let mut names = Vec::new();
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        names.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    for expected in [
        "sluice.db",
        "sluice.db-wal",
        "sluice.db-shm",
        "sluice.reserve",
    ] {
        assert!(names.iter().any(|name| name == expected), "{names:?}");
    }
}
