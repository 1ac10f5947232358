//! Queues whose push delivery an operator paused (`POST /v1/queues/{queue}/push/pause`).
//!
//! A pause must outlive a restart: it is the escape from a destination or message that keeps
//! failing, and the config file's queues are applied again at every start, so the pause cannot
//! live in the queue's definition. It is server state, like push itself, so it is a small file
//! next to the database, `push-paused.json` (a JSON array of queue names), replaced atomically
//! (written to a temporary file, synced, renamed, the directory synced) before the API answers.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "push-paused.json";

/// The paused queues, in memory and on disk.
#[derive(Debug)]
pub struct PushPauses {
    path: PathBuf,
    names: Mutex<BTreeSet<String>>,
    /// One writer of the file at a time.
    writing: tokio::sync::Mutex<()>,
}

impl PushPauses {
    /// Reads the file in `data_dir` (none yet: nothing paused).
    pub fn load(data_dir: &Path) -> Result<Self, String> {
        let path = data_dir.join(FILE_NAME);
        let names = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!("{} is not a JSON list of queue names: {e}", path.display())
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        Ok(Self {
            path,
            names: Mutex::new(names),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    /// True while the queue's push delivery is paused.
    pub fn is_paused(&self, queue: &str) -> bool {
        self.names.lock().contains(queue)
    }

    /// Pauses or resumes a queue's push delivery; returns once the change is on disk.
    pub async fn set(&self, queue: &str, paused: bool) -> Result<(), String> {
        let _writing = self.writing.lock().await;
        let mut names = self.names.lock().clone();
        let changed = if paused {
            names.insert(queue.to_owned())
        } else {
            names.remove(queue)
        };
        if !changed {
            return Ok(());
        }
        let path = self.path.clone();
        let text = serde_json::to_vec(&names).map_err(|e| e.to_string())?;
        tokio::task::spawn_blocking(move || replace_file(&path, &text))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot write {FILE_NAME}: {e}"))?;
        *self.names.lock() = names;
        Ok(())
    }
}

/// Replaces `path` with `bytes` so that a crash leaves the old or the new file, never a mix.
fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pauses_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let pauses = PushPauses::load(dir.path()).unwrap();
        assert!(!pauses.is_paused("a"));
        pauses.set("a", true).await.unwrap();
        pauses.set("b", true).await.unwrap();
        pauses.set("b", false).await.unwrap();
        let reloaded = PushPauses::load(dir.path()).unwrap();
        assert!(reloaded.is_paused("a") && !reloaded.is_paused("b"));
        std::fs::write(dir.path().join(FILE_NAME), "{").unwrap();
        assert!(PushPauses::load(dir.path()).is_err());
    }
}
