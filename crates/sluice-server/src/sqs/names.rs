//! Queue names, URLs and ARNs as SQS clients give and expect them (docs/design/sqs-compat.md
//! §3.0): URLs are `<base>/<account>/<queue>`, ARNs `arn:aws:sqs:<region>:<account>:<queue>`,
//! and any URL's last segment, a path, or a bare name is accepted as input.

use axum::http::HeaderMap;
use sluice_sqs::{ErrorKind, SqsError};

use super::config::SqsConfig;

/// Where the request's client reaches the server: the base of the queue URLs it is given.
pub fn base_url(config: &SqsConfig, headers: &HeaderMap, tls: bool) -> String {
    if let Some(url) = &config.public_url {
        return url.clone();
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(',').next().unwrap_or(value).trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    let scheme =
        header("x-forwarded-proto").unwrap_or_else(|| if tls { "https" } else { "http" }.into());
    let host = header("x-forwarded-host")
        .or_else(|| header("host"))
        .unwrap_or_else(|| "localhost".into());
    format!("{scheme}://{host}")
}

/// The URL of queue `name`.
pub fn queue_url(base: &str, config: &SqsConfig, name: &str) -> String {
    format!("{base}/{}/{name}", config.account_id)
}

/// The ARN of queue `name`.
pub fn queue_arn(config: &SqsConfig, name: &str) -> String {
    format!("arn:aws:sqs:{}:{}:{name}", config.region, config.account_id)
}

/// The queue a `QueueUrl` names: a URL (any host), a path `/<account>/<queue>`, or a bare name.
/// Another account's queue, or a name sluice cannot hold, does not exist.
pub fn queue_of_url(config: &SqsConfig, text: &str) -> Result<String, SqsError> {
    let path = match text.find("://") {
        Some(at) => {
            let rest = &text[at + 3..];
            rest.find('/').map_or("", |slash| &rest[slash..])
        }
        None => text,
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let name = match segments.as_slice() {
        [name] => *name,
        [.., account, name] if *account == config.account_id => *name,
        _ => return Err(SqsError::queue_does_not_exist()),
    };
    existing_name(name)
}

/// The queue an ARN names, in this account (any region).
pub fn queue_of_arn(config: &SqsConfig, arn: &str, parameter: &str) -> Result<String, SqsError> {
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", _, "sqs", _, account, name] if *account == config.account_id => existing_name(name),
        ["arn", _, "sqs", _, _, _] => Err(SqsError::queue_does_not_exist()),
        _ => Err(SqsError::new(
            ErrorKind::InvalidParameterValue,
            format!(
                "Value {arn} for parameter {parameter} is invalid. Reason: not an SQS queue ARN."
            ),
        )),
    }
}

fn existing_name(name: &str) -> Result<String, SqsError> {
    sluice_core::queue::validate_queue_name(name).map_err(|_| SqsError::queue_does_not_exist())?;
    Ok(name.to_owned())
}

/// SQS's rule for a new queue's name: 1 to 80 of `[A-Za-z0-9_-]`, FIFO names ending in
/// `.fifo` (counted). Other operations accept any sluice name, so native queues such as
/// `orders.dlq` stay reachable.
pub fn check_new_name(name: &str) -> Result<(), SqsError> {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    let valid = !stem.is_empty()
        && name.len() <= 80
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(SqsError::new(
            ErrorKind::InvalidParameterValue,
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_paths_and_bare_names_name_the_queue() {
        let config = SqsConfig::default();
        for text in [
            "http://127.0.0.1:7566/000000000000/orders",
            "https://sqs.us-east-1.amazonaws.com/000000000000/orders",
            "/000000000000/orders",
            "orders",
        ] {
            assert_eq!(queue_of_url(&config, text).unwrap(), "orders", "{text}");
        }
        for text in [
            "http://h/123456789012/orders",
            "http://h/",
            "bad name",
            "http://h/000000000000/a/b/c",
        ] {
            let error = queue_of_url(&config, text).unwrap_err();
            assert_eq!(error.kind, ErrorKind::QueueDoesNotExist, "{text}");
        }
    }

    #[test]
    fn arns_name_queues_of_this_account_in_any_region() {
        let config = SqsConfig::default();
        assert_eq!(
            queue_of_arn(&config, "arn:aws:sqs:eu-west-1:000000000000:dlq", "p").unwrap(),
            "dlq"
        );
        assert_eq!(
            queue_of_arn(&config, "arn:aws:sqs:us-east-1:111111111111:dlq", "p")
                .unwrap_err()
                .kind,
            ErrorKind::QueueDoesNotExist
        );
        assert_eq!(
            queue_of_arn(&config, "dlq", "p").unwrap_err().kind,
            ErrorKind::InvalidParameterValue
        );
        assert_eq!(
            queue_arn(&config, "q"),
            "arn:aws:sqs:us-east-1:000000000000:q"
        );
    }

    #[test]
    fn new_names_follow_sqs_rules() {
        assert!(check_new_name("orders").is_ok());
        assert!(check_new_name("orders-1_a.fifo").is_ok());
        assert!(check_new_name(&"a".repeat(80)).is_ok());
        for bad in ["", ".fifo", "a.b", "a b", &"a".repeat(81), "orders.dlq"] {
            assert!(check_new_name(bad).is_err(), "{bad}");
        }
    }
}
