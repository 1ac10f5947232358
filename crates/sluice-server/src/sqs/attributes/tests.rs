use super::*;
use sluice_core::store::QueueDepth;

fn info(name: &str, config: QueueConfig) -> QueueInfo {
    QueueInfo {
        name: name.into(),
        config,
        depth: QueueDepth::default(),
        dead_letter_depth: None,
        is_push_paused: false,
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_new_standard_queue_shows_sqs_defaults() {
    let sqs = SqsConfig::default();
    let all = all(
        &info("jobs", new_queue("jobs", false, &sqs, 1_700_000_000_000)),
        &sqs,
    );
    assert_eq!(all["VisibilityTimeout"], "30");
    assert_eq!(all["MaximumMessageSize"], "1048576");
    assert_eq!(all["MessageRetentionPeriod"], "345600");
    assert_eq!(all["DelaySeconds"], "0");
    assert_eq!(all["ReceiveMessageWaitTimeSeconds"], "0");
    assert_eq!(all["CreatedTimestamp"], "1700000000");
    assert_eq!(all["QueueArn"], "arn:aws:sqs:us-east-1:000000000000:jobs");
    assert!(!all.contains_key("FifoQueue") && !all.contains_key("RedrivePolicy"));
}

#[test]
fn attributes_map_onto_the_configuration_and_back() {
    let sqs = SqsConfig::default();
    let mut config = new_queue("jobs.fifo", true, &sqs, 0);
    let given = map(&[
        ("VisibilityTimeout", "45"),
        ("DelaySeconds", "5"),
        ("MessageRetentionPeriod", "60"),
        ("ContentBasedDeduplication", "True"),
        ("ReceiveMessageWaitTimeSeconds", "20"),
    ]);
    check_names(&given, true).unwrap();
    let redrive = parse_redrive(
        &sqs,
        r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dead.fifo","maxReceiveCount":"3"}"#,
    )
    .unwrap();
    apply(&mut config, &given, Some(redrive), &sqs, 0).unwrap();
    assert_eq!(config.visibility_timeout_ms, 45_000);
    assert_eq!(config.delay_ms, 5_000);
    assert_eq!(config.max_age_ms, 60_000);
    assert_eq!(config.dead_letter_queue.as_deref(), Some("dead.fifo"));
    assert_eq!(config.max_attempts, 3);
    let all = all(&info("jobs.fifo", config), &sqs);
    assert_eq!(all["ContentBasedDeduplication"], "true");
    assert_eq!(all["FifoQueue"], "true");
    assert_eq!(
        all["RedrivePolicy"],
        r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dead.fifo","maxReceiveCount":3}"#
    );
    assert_eq!(first_difference(&all, &given, &sqs), None);
    assert_eq!(
        first_difference(&all, &map(&[("DelaySeconds", "6")]), &sqs).as_deref(),
        Some("DelaySeconds")
    );
}

#[test]
fn bad_names_and_values_are_refused_as_aws_does() {
    let sqs = SqsConfig::default();
    let error = check_names(&map(&[("FifoQueue", "false")]), false).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidAttributeName);
    assert_eq!(error.message, "Unknown Attribute FifoQueue.");
    assert!(check_names(&map(&[("QueueArn", "x")]), false).is_err());
    let mut config = new_queue("q", false, &sqs, 0);
    for (name, value) in [
        ("VisibilityTimeout", "43201"),
        ("DelaySeconds", "-1"),
        ("MaximumMessageSize", "1023"),
        ("MaximumMessageSize", "1048577"),
    ] {
        let error = apply(&mut config, &map(&[(name, value)]), None, &sqs, 0).unwrap_err();
        assert_eq!(
            error.kind,
            ErrorKind::InvalidAttributeValue,
            "{name}={value}"
        );
    }
    for text in [
        "{}",
        r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:d"}"#,
        r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:d","maxReceiveCount":"x"}"#,
        "not json",
    ] {
        assert_eq!(
            parse_redrive(&sqs, text).unwrap_err().kind,
            ErrorKind::InvalidParameterValue,
            "{text}"
        );
    }
    assert_eq!(parse_redrive(&sqs, "").unwrap(), None);
}
