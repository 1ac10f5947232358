//! A failure reported with a visibility change: sluice's extension that lets an SQS client
//! nack (docs/sqs.md, "Reporting a failure").
//!
//! SQS has no call for "this attempt failed": a consumer lets the visibility timeout run out,
//! and SQS moves the message to the dead-letter queue on a later receive, with no error. A
//! client that knows it talks to sluice (the SDKs' SQS backends) sends
//! `ChangeMessageVisibility` with the header `x-sluice-failure` (the error, percent-encoded
//! UTF-8) and, for a failure that must not be retried, `x-sluice-failure-permanent: true`.
//! The call is then a nack (`Ops::nack`, the rule of every door): the message is retried after
//! `VisibilityTimeout` seconds, or dead-lettered with its error when its attempts are used up
//! (`maxReceiveCount`) or the failure is permanent, counted and alerted as any dead letter.
//! The answer says which in `x-sluice-outcome` (`retried` or `dead-lettered`); a server that
//! does not know the header (AWS, another emulator) changes the visibility and sends none, so
//! the client knows to dead-letter by itself.

use axum::http::{HeaderMap, HeaderValue};
use sluice_sqs::{ErrorKind, SqsError};

/// The error of the failed attempt, percent-encoded.
pub const FAILURE_HEADER: &str = "x-sluice-failure";
/// `true`: dead-letter now, do not retry.
pub const PERMANENT_HEADER: &str = "x-sluice-failure-permanent";
/// The answer: what the nack did.
pub const OUTCOME_HEADER: &str = "x-sluice-outcome";

/// A reported failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    /// The error, decoded (cut to the kept length by the nack).
    pub error: String,
    /// Dead-letter now.
    pub permanent: bool,
}

impl Reported {
    /// The failure the request's headers report, if any; a header that is not percent-encoded
    /// UTF-8, or a permanence that is not `true` or `false`, is refused.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, SqsError> {
        let permanent = match headers.get(PERMANENT_HEADER).map(HeaderValue::to_str) {
            None => None,
            Some(Ok("true")) => Some(true),
            Some(Ok("false")) => Some(false),
            Some(_) => {
                return Err(invalid(format!("{PERMANENT_HEADER} must be true or false")));
            }
        };
        let Some(value) = headers.get(FAILURE_HEADER) else {
            return match permanent {
                Some(_) => Err(invalid(format!(
                    "{PERMANENT_HEADER} needs {FAILURE_HEADER}, the failure's error"
                ))),
                None => Ok(None),
            };
        };
        let error = percent_encoding::percent_decode(value.as_bytes())
            .decode_utf8()
            .map_err(|_| invalid(format!("{FAILURE_HEADER} must be percent-encoded UTF-8")))?
            .into_owned();
        Ok(Some(Self {
            error,
            permanent: permanent.unwrap_or(false),
        }))
    }
}

fn invalid(message: String) -> SqsError {
    SqsError::new(ErrorKind::InvalidParameterValue, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_failure_is_read_from_its_headers() {
        assert_eq!(Reported::from_headers(&headers(&[])).unwrap(), None);
        assert_eq!(
            Reported::from_headers(&headers(&[(FAILURE_HEADER, "boom%3A%20%C3%A9t%C3%A9")]))
                .unwrap(),
            Some(Reported {
                error: "boom: été".into(),
                permanent: false
            })
        );
        assert_eq!(
            Reported::from_headers(&headers(&[
                (FAILURE_HEADER, "bad"),
                (PERMANENT_HEADER, "true")
            ]))
            .unwrap()
            .map(|reported| reported.permanent),
            Some(true)
        );
    }

    #[test]
    fn a_malformed_report_is_refused() {
        for pairs in [
            &[(FAILURE_HEADER, "%FF%FE")][..],
            &[(FAILURE_HEADER, "x"), (PERMANENT_HEADER, "yes")][..],
            &[(PERMANENT_HEADER, "true")][..],
        ] {
            let error = Reported::from_headers(&headers(pairs)).unwrap_err();
            assert_eq!(error.kind, ErrorKind::InvalidParameterValue, "{pairs:?}");
        }
    }
}
