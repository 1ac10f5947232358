//! Shared by the examples: run against a server (`SLUICE_URL`), an example removes the queues it
//! made (`<name>-<pid>` and their dead-letter queues), so runs leave nothing behind. The
//! embedded backend's temporary store goes away with the process by itself.

/// Deletes each queue; its dead-letter queue `<name>.dlq` goes with it (the server's default).
/// Only reports failures: the example's own result is what counts.
pub async fn remove_queues(names: &[&str]) {
    let Ok(url) = std::env::var("SLUICE_URL") else {
        return;
    };
    let client = match sluice_client::Client::new(&url) {
        Ok(client) => client,
        Err(error) => return eprintln!("cleanup: {error}"),
    };
    for name in names {
        if let Err(error) = client.queue_delete(name).await {
            eprintln!("cleanup: could not delete queue {name}: {error}");
        }
    }
    println!("removed the queues {names:?} and their dead-letter queues");
}
