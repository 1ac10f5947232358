//! Body schemas: a queue's JSON Schema refuses bad bodies (422 `schema_violation`) before
//! anything is stored.

use serde_json::{Value, json};

use crate::support::{Reply, TestServer};

fn order_schema() -> Value {
    json!({
        "type": "object",
        "required": ["id", "amount"],
        "properties": {"amount": {"type": "number", "minimum": 0}}
    })
}

async fn send(server: &TestServer, message: Value) -> Reply {
    server.post("/v1/queues/q/messages", message).await
}

/// The violations of a 422 schema_violation, checked for shape.
fn violations(reply: &Reply) -> Vec<Value> {
    let error = reply.error(422, "schema_violation");
    let violations = error["details"]["violations"]
        .as_array()
        .unwrap_or_else(|| panic!("no details.violations: {error}"))
        .clone();
    for violation in &violations {
        let _: sluice_wire::SchemaViolationOut = serde_json::from_value(violation.clone())
            .unwrap_or_else(|e| panic!("violation {violation} has the wrong shape: {e}"));
    }
    violations
}

#[tokio::test]
async fn a_schema_refuses_bad_bodies_and_lists_every_violation() {
    // Proves a queue schema: {"amount": -1} gets 422 schema_violation listing both problems
    // (missing "id" at the root, "minimum" at /amount) with index 0 and nothing is stored; a
    // valid body is accepted; a batch with message 1 of 3 bad is refused whole with violations
    // at index 1 only; a batch with two bad messages lists both indexes; a body_base64 message
    // is refused.
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server
        .put_queue("q", json!({ "schema": order_schema() }))
        .await;
    assert_eq!(queue["config"]["schema"], order_schema(), "{queue}");

    let found = violations(&send(&server, json!({"body": {"amount": -1}})).await);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found.iter().all(|violation| violation["index"] == 0),
        "{found:?}"
    );
    let missing = found
        .iter()
        .find(|violation| violation["reason"].as_str().unwrap().contains("\"id\""))
        .unwrap_or_else(|| panic!("no violation names the missing \"id\": {found:?}"));
    assert_eq!(
        missing["path"], "",
        "the missing property is reported at the root"
    );
    let minimum = found
        .iter()
        .find(|violation| violation["path"] == "/amount")
        .unwrap_or_else(|| panic!("no violation at /amount: {found:?}"));
    assert!(
        minimum["reason"].as_str().unwrap().contains('0'),
        "the minimum violation does not name the minimum: {minimum}"
    );
    assert_eq!(
        server.stats("q").await["ready"],
        0,
        "a refused body was stored"
    );

    let accepted = server
        .send("q", json!({"body": {"id": "o-1", "amount": 12.5}}))
        .await;
    assert_eq!(accepted["created"], true, "{accepted}");

    let batch = send(
        &server,
        json!({"messages": [
            {"body": {"id": "o-2", "amount": 1}},
            {"body": {"id": "o-3", "amount": "lots"}},
            {"body": {"id": "o-4", "amount": 0}},
        ]}),
    )
    .await;
    let found = violations(&batch);
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|violation| violation["index"] == 1),
        "{found:?}"
    );
    assert!(
        found.iter().any(|violation| violation["path"] == "/amount"),
        "{found:?}"
    );

    let batch = send(
        &server,
        json!({"messages": [
            {"body": {"amount": 1}},
            {"body": {"id": "o-5", "amount": 1}},
            {"body": "not an object"},
        ]}),
    )
    .await;
    let indexes: Vec<u64> = violations(&batch)
        .iter()
        .map(|violation| violation["index"].as_u64().unwrap())
        .collect();
    assert!(
        indexes.contains(&0) && indexes.contains(&2) && !indexes.contains(&1),
        "violations should name messages 0 and 2: {indexes:?}"
    );

    send(&server, json!({"body_base64": "AAEC"}))
        .await
        .client_error();
    assert_eq!(
        server.stats("q").await["ready"],
        1,
        "only the valid body is stored"
    );
    assert_eq!(server.stats("q").await["counters"]["enqueued"], 1);
}

#[tokio::test]
async fn schemas_are_validated_kept_and_removed() {
    // Proves an invalid schema document on PUT is 422 invalid_field naming `schema` and changes
    // nothing; an update that does not mention `schema` keeps it; `"schema": null` removes it,
    // after which any body is accepted; a queue without a schema takes body_base64.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({ "schema": order_schema() }))
        .await;

    let error = server
        .put("/v1/queues/q", json!({"schema": {"type": "no-such-type"}}))
        .await
        .error(422, "invalid_field");
    assert!(
        error["message"].as_str().unwrap().contains("schema"),
        "{error}"
    );
    let queue = server.get("/v1/queues/q").await.ok();
    assert_eq!(queue["config"]["schema"], order_schema(), "{queue}");

    let queue = server.put_queue("q", json!({"max_attempts": 3})).await;
    assert_eq!(
        queue["config"]["schema"],
        order_schema(),
        "an update dropped the schema"
    );
    violations(&send(&server, json!({"body": {"amount": -1}})).await);

    let queue = server.put_queue("q", json!({"schema": null})).await;
    assert!(queue["config"]["schema"].is_null(), "{queue}");
    server.send("q", json!({"body": {"amount": -1}})).await;
    server.send("q", json!({"body_base64": "AAEC"})).await;
    assert_eq!(server.stats("q").await["ready"], 2);

    // A schema given at creation is checked the same way.
    server
        .put("/v1/queues/q2", json!({"schema": {"minimum": "zero"}}))
        .await
        .error(422, "invalid_field");
    server
        .get("/v1/queues/q2")
        .await
        .error(404, "queue_not_found");
}

#[tokio::test]
async fn the_schema_draft_follows_dollar_schema() {
    // Proves the draft is detected from "$schema": a draft-07 tuple `items` array is accepted
    // and enforced by position, while the same schema without "$schema" (2020-12, where
    // `items` must be a schema) is refused with 422 invalid_field.
    let server = TestServer::builder().test_clock(true).start().await;
    let draft7 = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}, {"type": "integer"}]
    });
    server.put_queue("q", json!({ "schema": draft7 })).await;
    server.send("q", json!({"body": ["a", 1]})).await;
    let found = violations(&send(&server, json!({"body": ["a", "b"]})).await);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["path"], "/1", "{found:?}");

    server
        .put(
            "/v1/queues/q2",
            json!({"schema": {"type": "array", "items": [{"type": "string"}]}}),
        )
        .await
        .error(422, "invalid_field");
}
