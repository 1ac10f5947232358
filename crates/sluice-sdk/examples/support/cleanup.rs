//! Shared by the examples: run against a server (`SLUICE_URL`), an example removes the queues it
//! made (`<name>-<pid>` and their dead-letter queues), so runs leave nothing behind. The
//! embedded backend's temporary store goes away with the process by itself.

/// Deletes each queue, then its dead-letter queue `<name>.dlq` (a dead-letter queue cannot go
/// while its source queue uses it). Only reports failures: the example's own result is what
/// counts.
pub async fn remove_queues(names: &[&str]) {
    let Ok(url) = std::env::var("SLUICE_URL") else {
        return;
    };
    let client = match sluice_client::Client::new(&url) {
        Ok(client) => client,
        Err(error) => return eprintln!("cleanup: {error}"),
    };
    for name in names {
        for queue in [name.to_string(), format!("{name}.dlq")] {
            if let Err(error) = client.queue_delete(&queue).await {
                eprintln!("cleanup: could not delete queue {queue}: {error}");
            }
        }
    }
    println!("removed the queues {names:?} and their dead-letter queues");
}
