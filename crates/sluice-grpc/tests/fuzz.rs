//! Property-based fuzzing of the gRPC request decoders (issue 30): every request message of
//! `sluice.v1.Queues` decoded from random bytes and from valid encodings with bytes flipped,
//! cut or repeated. A decode must answer without a panic, and what decodes must survive
//! encode → decode unchanged (prost is the decoder the server runs, behind the gate that counts
//! a message's fields and bytes first: crates/sluice-server/src/grpc/gate.rs).
//!
//! The CI run is short; the long run (RELIABILITY.md):
//!
//! ```text
//! SLUICE_FUZZ_CASES=2000000 cargo test --release -p sluice-grpc --test fuzz -- --nocapture
//! ```

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use prost::Message;
use sluice_grpc::v1;

fn runner() -> TestRunner {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(300);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Valid encodings of every request, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let message = v1::OutgoingMessage {
        body: Some(v1::outgoing_message::Body::Json("{\"n\":1}".into())),
        key: Some("k".into()),
        id: Some("id".into()),
        priority: Some(-3),
        delay_ms: Some(1000),
        headers: [("h".to_owned(), "v".to_owned())].into(),
        ..Default::default()
    };
    vec![
        v1::EnqueueRequest {
            queue: "q".into(),
            messages: vec![message.clone(), message.clone()],
        }
        .encode_to_vec(),
        v1::PublishRequest {
            seq: 7,
            queue: "q".into(),
            message: Some(message),
        }
        .encode_to_vec(),
        v1::AckRequest {
            queue: "q".into(),
            receipts: vec!["r1".into(), "r2".into()],
            ..Default::default()
        }
        .encode_to_vec(),
        v1::NackRequest {
            queue: "q".into(),
            receipt: "r".into(),
            error: Some("boom".into()),
            ..Default::default()
        }
        .encode_to_vec(),
        v1::ReceiveRequest {
            queue: "q".into(),
            max: Some(10),
            ..Default::default()
        }
        .encode_to_vec(),
        v1::ReplayDeadLettersRequest {
            queue: "q".into(),
            message_ids: vec!["m".into()],
            ..Default::default()
        }
        .encode_to_vec(),
    ]
}

/// Decodes `bytes` as `M`; what decodes must encode back to the same bytes once decoded
/// again (compared encoded, so a NaN in a double compares equal to itself).
fn check<M: Message + Default>(bytes: &[u8]) {
    if let Ok(decoded) = M::decode(bytes) {
        let encoded = decoded.encode_to_vec();
        let again = M::decode(encoded.as_slice()).expect("re-encoded decodes");
        assert_eq!(again.encode_to_vec(), encoded);
    }
}

fn check_all(bytes: &[u8]) {
    check::<v1::EnqueueRequest>(bytes);
    check::<v1::PublishRequest>(bytes);
    check::<v1::PullRequest>(bytes);
    check::<v1::ReceiveRequest>(bytes);
    check::<v1::AckRequest>(bytes);
    check::<v1::NackRequest>(bytes);
    check::<v1::ExtendRequest>(bytes);
    check::<v1::GetMessageRequest>(bytes);
    check::<v1::CancelRequest>(bytes);
    check::<v1::PutQueueRequest>(bytes);
    check::<v1::ReplayDeadLettersRequest>(bytes);
    check::<v1::ListDeadLettersRequest>(bytes);
}

#[test]
fn random_bytes_decode_or_fail_cleanly() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..2048), |bytes| {
            check_all(&bytes);
            Ok(())
        })
        .unwrap();
}

#[test]
fn mutated_requests_decode_or_fail_cleanly() {
    let seeds = seeds();
    let strategy = (
        0..seeds.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        any::<prop::sample::Index>(),
        0usize..4,
    );
    runner()
        .run(&strategy, |(seed, flips, cut, repeats)| {
            let mut bytes = seeds[seed].clone();
            for (at, byte) in flips {
                let at = at.index(bytes.len());
                bytes[at] = byte;
            }
            bytes.truncate(cut.index(bytes.len() + 1));
            let once = bytes.clone();
            for _ in 0..repeats {
                bytes.extend_from_slice(&once);
            }
            check_all(&bytes);
            Ok(())
        })
        .unwrap();
}
