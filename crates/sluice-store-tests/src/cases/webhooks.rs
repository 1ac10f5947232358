//! Webhook endpoint definitions: kept as given, by name.

use crate::Harness;

/// Endpoint definitions are kept as the JSON text given, listed by name; putting a name again
/// replaces its definition; a delete says whether there was one.
pub async fn webhook_definitions_are_kept_by_name(h: Harness) {
    let now = h.now();
    assert!(h.store.webhook_list().await.unwrap().is_empty());
    let github = r#"{"queue":"pushes","verify":{"scheme":"github"}}"#;
    h.store
        .webhook_put("stripe", r#"{"queue":"payments"}"#.into(), now)
        .await
        .unwrap();
    h.store
        .webhook_put("github", github.into(), now)
        .await
        .unwrap();
    h.store
        .webhook_put("Zebra", "{}".into(), now)
        .await
        .unwrap();
    h.store
        .webhook_put("stripe", r#"{"queue":"billing"}"#.into(), now)
        .await
        .unwrap();
    assert_eq!(
        h.store.webhook_list().await.unwrap(),
        [
            ("Zebra".to_owned(), "{}".to_owned()),
            ("github".to_owned(), github.to_owned()),
            ("stripe".to_owned(), r#"{"queue":"billing"}"#.to_owned()),
        ],
        "by name as Rust orders strings, the last definition of each"
    );
    assert!(h.store.webhook_delete("github").await.unwrap());
    assert!(!h.store.webhook_delete("github").await.unwrap());
    assert!(!h.store.webhook_delete("nowhere").await.unwrap());
    let names: Vec<String> = h
        .store
        .webhook_list()
        .await
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, ["Zebra", "stripe"]);
}
