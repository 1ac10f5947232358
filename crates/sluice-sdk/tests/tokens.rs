//! The `Http` and `Grpc` backends against a sluice server with access control on: with a token
//! each produces, receives and acks; without one, or with a wrong one, the server refuses it (with
//! the same errors over both protocols), and the token never shows in an error or in `Debug`.

use std::sync::Arc;
use std::time::Duration;

use sluice_sdk::{Backend, Error, Grpc, Http, Queue};
use sluice_server::ServeOptions;
use sluice_server::config::Config;
use sluice_testkit::server::{InProcess, in_process};

const ADMIN: &str = "sdk-admin-token-0123456789";
const CONSUMER: &str = "sdk-consumer-token-0123456789";

/// A server on 127.0.0.1 with an admin token and a consumer token of `jobs*`, both read from
/// files; stopped when the returned server is dropped.
async fn server_with_tokens(dir: &std::path::Path) -> (String, InProcess) {
    std::fs::write(dir.join("admin"), ADMIN).unwrap();
    std::fs::write(dir.join("consumer"), CONSUMER).unwrap();
    let config = format!(
        r#"
[[auth.tokens]]
name = "ops"
token = {{ file = {admin:?} }}
roles = ["admin"]

[[auth.tokens]]
name = "workers"
token = {{ file = {consumer:?} }}
roles = ["consumer"]
queues = ["jobs*"]
"#,
        admin = dir.join("admin").display().to_string(),
        consumer = dir.join("consumer").display().to_string(),
    );
    std::fs::write(dir.join("sluice.toml"), config).unwrap();
    let data = dir.join("data");
    let config = Config::load(&ServeOptions {
        data_dir: Some(data),
        config_path: Some(dir.join("sluice.toml")),
        durability: Some("os".into()),
        ..Default::default()
    })
    .expect("server config");
    let server = in_process(|listener, shutdown, ready| {
        sluice_server::run(config, listener, shutdown, ready)
    })
    .await;
    (server.url().to_owned(), server)
}

#[tokio::test]
async fn the_http_backend_sends_its_token_on_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _stop) = server_with_tokens(dir.path()).await;

    // Every route of the round trip needs the token: create, enqueue, receive, ack, stats.
    let admin = Arc::new(Http::with_token(&url, ADMIN).unwrap());
    assert!(!format!("{admin:?}").contains(ADMIN), "{admin:?}");
    let jobs: Queue<u32> = Queue::open(admin.clone(), "jobs").await.unwrap();
    jobs.enqueue(&7).await.unwrap();
    let leased = admin
        .receive("jobs", 10, Duration::from_secs(30), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].body, b"7");
    admin.ack("jobs", &leased[0].receipt).await.unwrap();
    assert_eq!(jobs.stats().await.unwrap().processed, 1);

    // A consumer token may receive but not enqueue: the server knows who is asking.
    let consumer = Http::with_token(&url, CONSUMER).unwrap();
    let as_consumer: Queue<u32> = Queue::new(Arc::new(consumer.clone()), "jobs");
    match as_consumer.enqueue(&8).await {
        Err(Error::Other {
            status: 403, code, ..
        }) => assert_eq!(code, "forbidden"),
        other => panic!("a consumer enqueued: {other:?}"),
    }
    assert!(
        consumer
            .receive("jobs", 1, Duration::from_secs(30), Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    // Without a token, or with a wrong one: 401, and the wrong token is not in the error.
    let wrong = "wrong-token-0123456789abcdef";
    for backend in [
        Http::new(&url).unwrap(),
        Http::with_token(&url, wrong).unwrap(),
    ] {
        let error = backend.stats("jobs").await.unwrap_err();
        match &error {
            Error::Other {
                status: 401, code, ..
            } => assert_eq!(code, "unauthorized"),
            other => panic!("no 401 without a valid token: {other:?}"),
        }
        let text = format!("{error} {error:?} {backend:?}");
        assert!(!text.contains(wrong), "{text}");
    }

    // A token an HTTP header cannot carry is refused before any request, without showing it.
    let error = Http::with_token(&url, "two\nlines-0123456789").unwrap_err();
    assert!(
        !format!("{error} {error:?}").contains("lines-0123456789"),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_grpc_backend_sends_its_token_on_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _stop) = server_with_tokens(dir.path()).await;

    // Every call of the round trip needs the token: create, enqueue, receive, ack, stats.
    let admin = Arc::new(Grpc::connect_with_token(&url, ADMIN).await.unwrap());
    assert!(!format!("{admin:?}").contains(ADMIN), "{admin:?}");
    let jobs: Queue<u32> = Queue::open(admin.clone(), "jobs").await.unwrap();
    jobs.enqueue(&7).await.unwrap();
    let leased = admin
        .receive("jobs", 10, Duration::from_secs(30), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].body, b"7");
    admin.ack("jobs", &leased[0].receipt).await.unwrap();
    assert_eq!(jobs.stats().await.unwrap().processed, 1);

    // A consumer token may receive but not enqueue: the server knows who is asking.
    let consumer = Grpc::connect_with_token(&url, CONSUMER).await.unwrap();
    let as_consumer: Queue<u32> = Queue::new(Arc::new(consumer.clone()), "jobs");
    match as_consumer.enqueue(&8).await {
        Err(Error::Other {
            status: 403, code, ..
        }) => assert_eq!(code, "forbidden"),
        other => panic!("a consumer enqueued: {other:?}"),
    }
    assert!(
        consumer
            .receive("jobs", 1, Duration::from_secs(30), Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    // Without a token, or with a wrong one: unauthorized (401 as over HTTP), and the wrong
    // token is not in the error.
    let wrong = "wrong-token-0123456789abcdef";
    for backend in [
        Grpc::connect(&url).await.unwrap(),
        Grpc::connect_with_token(&url, wrong).await.unwrap(),
    ] {
        let error = backend.stats("jobs").await.unwrap_err();
        match &error {
            Error::Other {
                status: 401, code, ..
            } => assert_eq!(code, "unauthorized"),
            other => panic!("no 401 without a valid token: {other:?}"),
        }
        let text = format!("{error} {error:?} {backend:?}");
        assert!(!text.contains(wrong), "{text}");
    }

    // A token metadata cannot carry is refused before any call, without showing it.
    let error = Grpc::connect_with_token(&url, "two\nlines-0123456789")
        .await
        .unwrap_err();
    assert!(
        !format!("{error} {error:?}").contains("lines-0123456789"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_that_is_not_there_is_unavailable() {
    // A port nothing listens on: bind one, then close it.
    let address = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    match Grpc::connect(&format!("http://{address}")).await {
        Err(Error::Unavailable(_)) => {}
        other => panic!("connected to nothing: {other:?}"),
    }
}
