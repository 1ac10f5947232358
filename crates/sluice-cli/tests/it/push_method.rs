//! A push destination's HTTP method is one of POST, PUT, PATCH, given exactly: any other is
//! refused when the queue is defined (422 naming `push.method`), and neither the queue nor its
//! destination is stored, so nothing is ever sent with a method nobody asked for.

use serde_json::json;

use crate::support::TestServer;

#[tokio::test]
async fn an_unknown_push_method_is_refused_at_definition() {
    let server = TestServer::builder().start().await;
    for method in ["GET", "DELETE", "post"] {
        let reply = server
            .put(
                "/v1/queues/hooked",
                json!({"push": {"url": "http://127.0.0.1:9/hook", "method": method}}),
            )
            .await;
        let error = reply.error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains("push.method"),
            "{method}: {error}"
        );
        server
            .get("/v1/queues/hooked")
            .await
            .error(404, "queue_not_found");
    }
    // An existing queue keeps its destination when an update names a wrong method.
    let put = server
        .put(
            "/v1/queues/hooked",
            json!({"push": {"url": "http://127.0.0.1:9/hook", "method": "PATCH"}}),
        )
        .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    server
        .put(
            "/v1/queues/hooked",
            json!({"push": {"url": "http://127.0.0.1:9/hook", "method": "TRACE"}}),
        )
        .await
        .error(422, "invalid_field");
    let queue = server.get("/v1/queues/hooked").await.json();
    assert_eq!(queue["config"]["push"]["method"], "PATCH", "{queue}");
}
