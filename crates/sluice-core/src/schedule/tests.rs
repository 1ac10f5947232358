use super::*;
use crate::rules::schedule::{Plan, plan};
use sluice_wire::ScheduleMessage;

fn spec(cron: Option<&str>, every_ms: Option<u64>, timezone: Option<&str>) -> ScheduleSpec {
    ScheduleSpec {
        queue: "reports".into(),
        cron: cron.map(str::to_owned),
        every_ms,
        timezone: timezone.map(str::to_owned),
        message: ScheduleMessage {
            body: Some(serde_json::json!({"report": "daily"})),
            body_base64: None,
            headers: None,
            key: None,
            priority: None,
        },
        jitter_ms: None,
        paused: None,
        missed: None,
        missed_max: None,
        grace_ms: None,
    }
}

fn cron_in(pattern: &str, zone: &str) -> Schedule {
    Schedule::compile("s", spec(Some(pattern), None, Some(zone))).unwrap()
}

fn ms(text: &str) -> Millis {
    sluice_wire::parse_rfc3339(text).unwrap()
}

fn utc(at: Millis) -> String {
    sluice_wire::format_rfc3339(at)
}

#[test]
fn a_definition_is_refused_with_the_field_named() {
    let refused = |spec: ScheduleSpec| Schedule::compile("s", spec).unwrap_err();
    assert!(refused(spec(None, None, None)).starts_with("cron:"));
    assert!(refused(spec(Some("* * * * *"), Some(1000), None)).starts_with("cron:"));
    assert!(refused(spec(Some("61 * * * *"), None, None)).starts_with("cron:"));
    assert!(refused(spec(Some("* * * * *"), None, Some("Mars/Olympus"))).starts_with("timezone:"));
    assert!(refused(spec(None, Some(999), None)).starts_with("every_ms:"));
    assert!(refused(spec(None, Some(60_000), Some("UTC"))).starts_with("timezone:"));
    let mut bad_max = spec(None, Some(60_000), None);
    bad_max.missed = Some(MissedRuns::RunAll);
    bad_max.missed_max = Some(0);
    assert!(refused(bad_max).starts_with("missed_max:"));
    assert!(
        Schedule::compile("a/b", spec(None, Some(1000), None))
            .unwrap_err()
            .starts_with("name:")
    );
    // Five fields (no seconds) and six (with seconds) are both cron patterns.
    Schedule::compile("s", spec(Some("*/5 * * * *"), None, None)).unwrap();
    Schedule::compile("s", spec(Some("*/5 * * * * *"), None, None)).unwrap();
}

#[test]
fn an_interval_runs_on_its_multiples_since_the_epoch() {
    let schedule = Schedule::compile("s", spec(None, Some(60_000), None)).unwrap();
    assert_eq!(schedule.timing.at_or_before(125_000), Some(120_000));
    assert_eq!(schedule.timing.at_or_before(120_000), Some(120_000));
    assert_eq!(schedule.timing.before(120_000), Some(60_000));
    assert_eq!(schedule.timing.after(120_000), Some(180_000));
    assert_eq!(schedule.timing.count_between(60_000, 240_000), 3);
}

#[test]
fn a_local_time_that_spring_forward_skips_runs_right_after_the_change() {
    // Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day.
    let daily = cron_in("30 2 * * *", "Europe/Berlin");
    let day_before = ms("2026-03-28T01:30:00Z"); // 02:30 CET
    assert_eq!(daily.timing.at_or_before(day_before), Some(day_before));
    let next = daily.timing.after(day_before).unwrap();
    assert_eq!(
        utc(next),
        "2026-03-29T01:00:00.000Z",
        "03:00 CEST, right after the gap"
    );
    let after = daily.timing.after(next).unwrap();
    assert_eq!(
        utc(after),
        "2026-03-30T00:30:00.000Z",
        "02:30 CEST the day after"
    );
}

#[test]
fn a_local_time_that_fall_back_repeats_runs_once() {
    // Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    let daily = cron_in("30 2 * * *", "Europe/Berlin");
    let before = ms("2026-10-24T12:00:00Z");
    let first = daily.timing.after(before).unwrap();
    assert_eq!(utc(first), "2026-10-25T00:30:00.000Z", "02:30 CEST");
    let second = daily.timing.after(first).unwrap();
    assert_eq!(
        utc(second),
        "2026-10-26T01:30:00.000Z",
        "not 02:30 CET again, but the next day"
    );
    // An hourly pattern runs every hour of absolute time, both 02:00s included.
    let hourly = cron_in("0 * * * *", "Europe/Berlin");
    let runs: Vec<String> =
        std::iter::successors(hourly.timing.after(ms("2026-10-24T23:30:00Z")), |&t| {
            hourly.timing.after(t)
        })
        .take(4)
        .map(utc)
        .collect();
    assert_eq!(
        runs,
        [
            "2026-10-25T00:00:00.000Z",
            "2026-10-25T01:00:00.000Z",
            "2026-10-25T02:00:00.000Z",
            "2026-10-25T03:00:00.000Z"
        ]
    );
}

#[test]
fn on_time_a_pass_makes_the_one_run_due_and_nothing_twice() {
    let schedule = Schedule::compile("s", spec(None, Some(60_000), None)).unwrap();
    assert_eq!(plan(&schedule, 60_000, 119_999), Plan::default());
    let due = plan(&schedule, 60_000, 120_400);
    assert_eq!(due.runs, [120_000]);
    assert_eq!(due.skipped, 0);
    assert_eq!(due.done_through, Some(120_000));
    // The same pass again, once its run is done: nothing.
    assert_eq!(plan(&schedule, 120_000, 120_900), Plan::default());
    // A clock gone back: nothing until it passes the last run again.
    assert_eq!(plan(&schedule, 120_000, 30_000), Plan::default());
}

#[test]
fn missed_runs_follow_the_policy() {
    let policy = |missed: MissedRuns, missed_max: Option<u32>| {
        let mut spec = spec(None, Some(60_000), None);
        spec.missed = Some(missed);
        spec.missed_max = missed_max;
        Schedule::compile("s", spec).unwrap()
    };
    // Down from just after 0 until 10 minutes and 30 s: runs 60_000 ..= 600_000 are due.
    let now = 630_000;
    let skip = plan(&policy(MissedRuns::Skip, None), 0, now);
    assert_eq!(skip.runs, [600_000], "only the run within grace_ms");
    assert_eq!(skip.skipped, 9);
    assert_eq!(skip.done_through, Some(600_000));
    let once = plan(&policy(MissedRuns::RunOnce, None), 0, 2 * 3_600_000);
    assert_eq!(once.runs, [7_200_000]);
    assert_eq!(once.skipped, 119);
    let all = plan(&policy(MissedRuns::RunAll, Some(4)), 0, now);
    assert_eq!(all.runs, [420_000, 480_000, 540_000, 600_000]);
    assert_eq!(all.skipped, 6);
    let all = plan(&policy(MissedRuns::RunAll, None), 0, now);
    assert_eq!(all.runs.len(), 10);
    assert_eq!(all.skipped, 0);
    // Skip, with every due run later than grace_ms: none made, all counted.
    let mut strict = spec(None, Some(60_000), None);
    strict.grace_ms = Some(500);
    let late = plan(&Schedule::compile("s", strict).unwrap(), 0, 661_000);
    assert!(late.runs.is_empty());
    assert_eq!(late.skipped, 11);
    assert_eq!(late.done_through, Some(660_000));
}

#[test]
fn a_paused_schedule_passes_its_runs_without_making_or_skipping_them() {
    let mut spec = spec(None, Some(60_000), None);
    spec.paused = Some(true);
    let schedule = Schedule::compile("s", spec).unwrap();
    let passed = plan(&schedule, 0, 630_000);
    assert!(passed.runs.is_empty());
    assert_eq!(passed.skipped, 0);
    assert_eq!(passed.done_through, Some(600_000));
}

#[test]
fn jitter_is_fixed_per_run_and_within_its_bound() {
    let mut spec = spec(None, Some(60_000), None);
    spec.jitter_ms = Some(5_000);
    let schedule = Schedule::compile("s", spec).unwrap();
    let draws: Vec<Millis> = (1..50).map(|k| schedule.jitter_for(k * 60_000)).collect();
    assert!(draws.iter().all(|&j| (0..=5_000).contains(&j)));
    assert!(draws.iter().any(|&j| j != draws[0]), "runs differ");
    assert_eq!(
        schedule.jitter_for(60_000),
        draws[0],
        "the same run, the same wait"
    );
    assert_eq!(schedule.run_key(60_000), "schedule:s:60000");
}

#[test]
fn a_search_from_within_a_second_stays_on_its_side_of_a_dst_change() {
    // 2026-10-25T00:59:59.999Z is 02:59:59.999 CEST, a millisecond before Berlin falls back;
    // the run at or before it is 02:00 CEST (00:00Z), not 02:00 CET (01:00Z, in its future).
    let hourly = cron_in("0 * * * *", "Europe/Berlin");
    let at = ms("2026-10-25T00:59:59.999Z");
    assert_eq!(
        hourly.timing.at_or_before(at).map(utc).as_deref(),
        Some("2026-10-25T00:00:00.000Z")
    );
    assert_eq!(
        hourly
            .timing
            .before(ms("2026-10-25T01:00:00Z"))
            .map(utc)
            .as_deref(),
        Some("2026-10-25T00:00:00.000Z")
    );
    assert_eq!(
        hourly.timing.after(at).map(utc).as_deref(),
        Some("2026-10-25T01:00:00.000Z")
    );
}

/// Issue 30, finding 10: one `run_all` schedule with `missed_max` 10,000 and a 100 KB body
/// wrote 1 GB in 38 s after a clock jump. A catch-up may enqueue at most
/// `CATCH_UP_BYTES_MAX`.
#[test]
fn a_catch_up_is_bounded_in_bytes() {
    let with = |missed_max: u32, body_bytes: usize| {
        let mut spec = spec(None, Some(60_000), None);
        spec.missed = Some(MissedRuns::RunAll);
        spec.missed_max = Some(missed_max);
        spec.message.body = Some(serde_json::Value::String("x".repeat(body_bytes)));
        Schedule::compile("s", spec)
    };
    let refused = with(10_000, 100_000).unwrap_err();
    assert!(refused.starts_with("missed_max:"), "{refused}");
    assert!(
        refused.contains(&CATCH_UP_BYTES_MAX.to_string()),
        "{refused}"
    );
    with(600, 100_000).unwrap();
    with(10_000, 100).unwrap();
}
