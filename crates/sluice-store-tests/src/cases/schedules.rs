//! Schedules: definitions kept as given, progress kept beside them, and a pass that advances a
//! schedule only from the run it read.

use sluice_core::store::{ScheduleRow, ScheduleState};

use crate::Harness;

/// A new schedule starts at the time it is defined; defining it again without a state keeps
/// its progress, with one replaces it; listing is by name; a delete says whether there was one.
pub async fn schedules_keep_their_progress_across_redefinitions(h: Harness) {
    let now = h.now();
    assert!(h.store.schedule_list().await.unwrap().is_empty());
    h.store
        .schedule_put("tick", r#"{"every_ms":60000}"#.into(), None, now)
        .await
        .unwrap();
    h.store
        .schedule_put("Zebra", "{}".into(), None, now)
        .await
        .unwrap();
    let advanced = ScheduleState {
        last_run_ms: now + 60_000,
        runs: 1,
        last_message_id: Some(uuid::Uuid::now_v7()),
        last_enqueued_at_ms: Some(now + 60_004),
        ..ScheduleState::default()
    };
    h.store
        .schedule_advance("tick", now, advanced.clone())
        .await
        .unwrap();
    // Defined again without a state: the new spec, the same progress.
    h.store
        .schedule_put(
            "tick",
            r#"{"every_ms":60000,"paused":true}"#.into(),
            None,
            now + 90_000,
        )
        .await
        .unwrap();
    assert_eq!(
        h.store.schedule_list().await.unwrap(),
        [
            ScheduleRow {
                name: "Zebra".into(),
                spec: "{}".into(),
                state: ScheduleState::starting(now),
            },
            ScheduleRow {
                name: "tick".into(),
                spec: r#"{"every_ms":60000,"paused":true}"#.into(),
                state: advanced.clone(),
            },
        ],
        "by name as Rust orders strings"
    );
    // With a state: it replaces the progress.
    let restarted = ScheduleState {
        last_run_ms: now + 120_000,
        ..advanced
    };
    h.store
        .schedule_put("tick", "{}".into(), Some(restarted.clone()), now + 120_000)
        .await
        .unwrap();
    let tick = |rows: Vec<ScheduleRow>| rows.into_iter().find(|r| r.name == "tick").unwrap();
    assert_eq!(
        tick(h.store.schedule_list().await.unwrap()).state,
        restarted
    );
    assert!(h.store.schedule_delete("tick").await.unwrap());
    assert!(!h.store.schedule_delete("tick").await.unwrap());
    assert_eq!(h.store.schedule_list().await.unwrap().len(), 1);
}

/// A pass records its progress only from the run it read: one that read an older run (another
/// node's pass, or one that overlapped a redefinition, moved the schedule first) changes
/// nothing, so a schedule never goes back and no pass is counted twice.
pub async fn a_pass_advances_a_schedule_only_from_the_run_it_read(h: Harness) {
    let now = h.now();
    h.store
        .schedule_put("tick", "{}".into(), None, now)
        .await
        .unwrap();
    let first = ScheduleState {
        last_run_ms: now + 60_000,
        runs: 1,
        ..ScheduleState::default()
    };
    h.store
        .schedule_advance("tick", now, first.clone())
        .await
        .unwrap();
    // A second pass that also read `now` loses: its state is not taken.
    let stale = ScheduleState {
        last_run_ms: now + 60_000,
        runs: 7,
        last_error: Some("stale".into()),
        ..ScheduleState::default()
    };
    h.store.schedule_advance("tick", now, stale).await.unwrap();
    let rows = h.store.schedule_list().await.unwrap();
    assert_eq!(rows[0].state, first);
    // Advancing a schedule that is gone changes nothing and is no error.
    h.store
        .schedule_advance("gone", now, first.clone())
        .await
        .unwrap();
    assert_eq!(h.store.schedule_list().await.unwrap().len(), 1);
}

/// A swap changes a definition only from the text it read: created only while absent,
/// replaced only while unchanged, so of two nodes that read the same alert state one wins.
pub async fn a_definition_swaps_only_from_the_text_it_read(h: Harness) {
    use sluice_core::store::DefinitionKind::{Alert, AlertState};
    let now = h.now();
    let swap = |expected: Option<&str>, spec: &str| {
        h.store.definition_swap(
            AlertState,
            "ops",
            expected.map(str::to_owned),
            spec.to_owned(),
            now,
        )
    };
    let read = || async {
        h.store
            .definition_list(AlertState)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, spec)| spec)
            .collect::<Vec<_>>()
    };
    swap(None, "first").await.unwrap();
    assert_eq!(read().await, ["first"]);
    // A second "create" loses to the first.
    swap(None, "second").await.unwrap();
    assert_eq!(read().await, ["first"]);
    // A swap from a text that is no longer there changes nothing.
    swap(Some("stale"), "third").await.unwrap();
    assert_eq!(read().await, ["first"]);
    swap(Some("first"), "fourth").await.unwrap();
    assert_eq!(read().await, ["fourth"]);
    // Kinds are namespaces: the alert's definition is untouched.
    assert!(h.store.definition_list(Alert).await.unwrap().is_empty());
}
