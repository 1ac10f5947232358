//! Is an HTTP request SQS, and in which protocol (docs/design/sqs-compat.md §1.1)?
//!
//! The SQS API shares sluice's main listener, so detection must never claim a request the
//! rest of the server serves: the dashboard answers `GET /`, and sluice's own API lives under
//! `/v1/…` with `application/json`. Rules, in order:
//! 1. a `Content-Type` subtype starting `x-amz-json`, or an `X-Amz-Target: AmazonSQS.…`
//!    header, is JSON on any path;
//! 2. otherwise, on `/` or a queue URL path `/<account>/<queue>` (the account all digits), an
//!    `Action` in the query string or the form body is the query protocol;
//! 3. otherwise a queue URL path is SQS's 404 `UnknownOperationException`; `POST /` is
//!    `MissingAction`; `GET /` is `MissingAction` only when it is signed for AWS
//!    (`Authorization: AWS4-HMAC-SHA256 …`), else it is the dashboard's.

use http::{HeaderMap, Method, header};

use crate::action::Action;
use crate::error::{ErrorKind, SqsError};

/// The two wire protocols, for rendering an answer in the one the request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Json,
    Query,
}

/// What a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protocol {
    /// Not SQS: the rest of the server routes it.
    NotSqs,
    /// AWS JSON 1.0; the body holds the members ([`crate::Request::from_json`]).
    Json { action: Action },
    /// AWS query: the query string's and the form body's parameters, in that order
    /// ([`crate::Request::from_query`]). On a queue URL path without a `QueueUrl` parameter,
    /// the path is added as `QueueUrl` (a parameter wins over the path, §1.2).
    Query {
        action: Action,
        params: Vec<(String, String)>,
    },
    /// SQS, but refused before parsing: answer `error` in `wire`'s rendering.
    Refused { wire: Wire, error: SqsError },
}

/// The parts of an HTTP request detection looks at. `query` is the raw query string without
/// `?`; `body` is read only for a form-encoded `POST`.
pub fn detect(
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Protocol {
    let target = header_text(headers, "x-amz-target");
    if content_subtype(headers).is_some_and(|subtype| subtype.starts_with("x-amz-json"))
        || target.is_some_and(|target| target.starts_with("AmazonSQS."))
    {
        return json(target);
    }
    let queue_path = is_queue_path(path);
    if path != "/" && !queue_path {
        return Protocol::NotSqs;
    }
    if method != Method::GET && method != Method::POST {
        return Protocol::NotSqs;
    }
    let form = (method == Method::POST && is_form(headers)).then_some(body);
    let params = match query_parameters(query, form) {
        Ok(params) => params,
        // An unsigned `GET /` naming no action is the dashboard's however many parameters it
        // has (rule 3), as `may_be_sqs` judges it (found by the fuzzer, issue 30).
        Err(_) if !may_be_sqs(method, path, query, headers) => return Protocol::NotSqs,
        Err(error) => return refused(Wire::Query, error),
    };
    let action = params
        .iter()
        .find(|(name, _)| name == "Action")
        .map(|(_, value)| value.clone());
    match action {
        Some(name) => query_action(&name, params, queue_path.then_some(path)),
        None if queue_path => refused(Wire::Query, SqsError::new(ErrorKind::UnknownOperation, "")),
        None if method == Method::POST || is_aws_signed(headers) => {
            refused(Wire::Query, SqsError::missing_action())
        }
        None => Protocol::NotSqs,
    }
}

/// Most parameters one query-protocol request may carry (query string and form body
/// together). The largest request AWS defines, a `SendMessageBatch` of 10 entries with 10
/// message attributes each, has about 400; the cap is counted before any parameter is decoded
/// or copied, so a body of millions of `&` costs nothing but its bytes.
pub const QUERY_PARAMETERS_MAX: usize = 1_000;
/// Most `.`-separated parts in a query parameter's name. The deepest AWS defines,
/// `SendMessageBatchRequestEntry.N.MessageAttribute.M.Value.StringListValue.K`, has 7; the
/// parameters are folded into a tree one level per part, so the cap bounds its depth.
pub const PARAMETER_NAME_PARTS_MAX: usize = 8;

/// The query string's and the form body's parameters, in that order, within
/// [`QUERY_PARAMETERS_MAX`] and [`PARAMETER_NAME_PARTS_MAX`].
fn query_parameters(
    query: Option<&str>,
    form: Option<&[u8]>,
) -> Result<Vec<(String, String)>, SqsError> {
    let sources = [query.map(str::as_bytes), form];
    // Counted on the raw bytes first: nothing is decoded or allocated for a request refused.
    let count: usize = sources
        .iter()
        .flatten()
        .map(|bytes| {
            bytes
                .split(|&b| b == b'&')
                .filter(|piece| !piece.is_empty())
                .count()
        })
        .sum();
    if count > QUERY_PARAMETERS_MAX {
        return Err(SqsError::new(
            ErrorKind::InvalidParameterValue,
            format!(
                "The request has {count} parameters; at most {QUERY_PARAMETERS_MAX} are accepted."
            ),
        ));
    }
    let mut params = Vec::with_capacity(count);
    for bytes in sources.into_iter().flatten() {
        for (name, value) in form_urlencoded::parse(bytes) {
            if name.split('.').count() > PARAMETER_NAME_PARTS_MAX {
                let shown: String = name.chars().take(64).collect();
                return Err(SqsError::new(
                    ErrorKind::InvalidParameterValue,
                    format!(
                        "The parameter name '{shown}…' has more than {PARAMETER_NAME_PARTS_MAX} '.'-separated parts."
                    ),
                ));
            }
            params.push((name.into_owned(), value.into_owned()));
        }
    }
    Ok(params)
}

/// Whether [`detect`] could claim a request, judged without its body: lets the server leave
/// every other request (its own API, the dashboard's pages) alone without reading a body.
pub fn may_be_sqs(method: &Method, path: &str, query: Option<&str>, headers: &HeaderMap) -> bool {
    // Every request of the server passes here: no allocation on the way to "no".
    let amz_json = headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        value
            .as_bytes()
            .windows(10)
            .any(|window| window.eq_ignore_ascii_case(b"x-amz-json"))
    });
    if amz_json || headers.contains_key("x-amz-target") {
        return true;
    }
    if is_queue_path(path) {
        return true;
    }
    path == "/"
        && (method == Method::POST
            || is_aws_signed(headers)
            || query.is_some_and(|query| {
                form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "Action")
            }))
}

fn json(target: Option<&str>) -> Protocol {
    let Some(target) = target else {
        return refused(Wire::Json, SqsError::missing_action());
    };
    let action = match target.strip_prefix("AmazonSQS.") {
        Some(name) => Action::from_name(name),
        None => Err(SqsError::invalid_action(target)),
    };
    match action {
        Ok(action) => Protocol::Json { action },
        Err(error) => refused(Wire::Json, error),
    }
}

fn query_action(
    name: &str,
    mut params: Vec<(String, String)>,
    queue_path: Option<&str>,
) -> Protocol {
    let action = match Action::from_name(name) {
        Ok(action) => action,
        Err(error) => return refused(Wire::Query, error),
    };
    if let Some(path) = queue_path {
        // These two name no queue, so a queue's URL is the wrong endpoint for them (§1.2).
        if matches!(action, Action::CreateQueue | Action::ListQueues) {
            return refused(Wire::Query, SqsError::invalid_action(name));
        }
        if !params.iter().any(|(name, _)| name == "QueueUrl") {
            params.push(("QueueUrl".to_owned(), path.to_owned()));
        }
    }
    Protocol::Query { action, params }
}

fn refused(wire: Wire, error: SqsError) -> Protocol {
    Protocol::Refused { wire, error }
}

/// `/<account>/<queue>`: an all-digit account (AWS's are 12 digits) and one more segment.
fn is_queue_path(path: &str) -> bool {
    let mut segments = path.strip_prefix('/').unwrap_or_default().split('/');
    match (segments.next(), segments.next(), segments.next()) {
        (Some(account), Some(queue), None) => {
            !account.is_empty() && account.bytes().all(|b| b.is_ascii_digit()) && !queue.is_empty()
        }
        _ => false,
    }
}

fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
}

/// The media subtype, lower-case: `x-amz-json-1.0` of `application/x-amz-json-1.0; charset=…`.
fn content_subtype(headers: &HeaderMap) -> Option<String> {
    let media = header_text(headers, header::CONTENT_TYPE.as_str())?
        .split(';')
        .next()?;
    let (_, subtype) = media.split_once('/')?;
    Some(subtype.trim().to_ascii_lowercase())
}

/// A form body: declared as one, or not declared at all (as SQS's emulators accept).
fn is_form(headers: &HeaderMap) -> bool {
    match content_subtype(headers) {
        Some(subtype) => subtype == "x-www-form-urlencoded",
        None => !headers.contains_key(header::CONTENT_TYPE),
    }
}

fn is_aws_signed(headers: &HeaderMap) -> bool {
    header_text(headers, header::AUTHORIZATION.as_str())
        .is_some_and(|value| value.starts_with("AWS4-HMAC-SHA256 "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&'static str, &'static str)]) -> HeaderMap {
        list.iter()
            .map(|(name, value)| {
                (
                    http::HeaderName::from_static(name),
                    http::HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    const JSON: (&str, &str) = ("content-type", "application/x-amz-json-1.0");

    #[test]
    fn may_be_sqs_leaves_the_native_api_and_the_dashboard_alone() {
        let native = headers(&[("content-type", "application/json")]);
        assert!(!may_be_sqs(
            &Method::POST,
            "/v1/queues/q/messages",
            None,
            &native
        ));
        assert!(!may_be_sqs(&Method::GET, "/", None, &HeaderMap::new()));
        assert!(!may_be_sqs(
            &Method::GET,
            "/",
            Some("tab=dlq"),
            &HeaderMap::new()
        ));
        assert!(!may_be_sqs(
            &Method::GET,
            "/ui/queues/q",
            None,
            &HeaderMap::new()
        ));
        assert!(may_be_sqs(
            &Method::GET,
            "/",
            Some("Action=ListQueues"),
            &HeaderMap::new()
        ));
        assert!(may_be_sqs(&Method::POST, "/", None, &HeaderMap::new()));
        assert!(may_be_sqs(
            &Method::GET,
            "/000000000000/q",
            None,
            &HeaderMap::new()
        ));
        let json = headers(&[("content-type", "Application/X-Amz-Json-1.0")]);
        assert!(may_be_sqs(&Method::POST, "/anything", None, &json));
        let target = headers(&[("x-amz-target", "AmazonSQS.ListQueues")]);
        assert!(may_be_sqs(&Method::POST, "/v1", None, &target));
    }
    const FORM: (&str, &str) = (
        "content-type",
        "application/x-www-form-urlencoded; charset=utf-8",
    );
    const SIGNED: (&str, &str) = (
        "authorization",
        "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00",
    );

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn json_by_content_type_or_target_on_any_path() {
        let h = headers(&[JSON, ("x-amz-target", "AmazonSQS.SendMessage")]);
        for path in ["/", "/000000000000/orders", "/anything/else"] {
            assert_eq!(
                detect(&Method::POST, path, None, &h, b"{}"),
                Protocol::Json {
                    action: Action::SendMessage
                }
            );
        }
        let target_only = headers(&[("x-amz-target", "AmazonSQS.ListQueues")]);
        assert_eq!(
            detect(&Method::POST, "/", None, &target_only, b"{}"),
            Protocol::Json {
                action: Action::ListQueues
            }
        );
    }

    #[test]
    fn json_without_a_known_target_is_refused_in_json() {
        let Protocol::Refused { wire, error } =
            detect(&Method::POST, "/", None, &headers(&[JSON]), b"{}")
        else {
            panic!("not refused")
        };
        assert_eq!((wire, error.kind), (Wire::Json, ErrorKind::MissingAction));
        let h = headers(&[JSON, ("x-amz-target", "AmazonSQS.FooBar")]);
        assert_eq!(
            detect(&Method::POST, "/", None, &h, b"{}"),
            Protocol::Refused {
                wire: Wire::Json,
                error: SqsError::invalid_action("FooBar")
            }
        );
    }

    #[test]
    fn query_by_action_in_the_query_string_or_the_form_body() {
        let get = detect(
            &Method::GET,
            "/",
            Some("Action=ListQueues&Version=2012-11-05"),
            &HeaderMap::new(),
            b"",
        );
        assert_eq!(
            get,
            Protocol::Query {
                action: Action::ListQueues,
                params: pairs(&[("Action", "ListQueues"), ("Version", "2012-11-05")])
            }
        );
        let post = detect(
            &Method::POST,
            "/",
            None,
            &headers(&[FORM]),
            b"Action=GetQueueUrl&Version=2012-11-05&QueueName=orders",
        );
        assert_eq!(
            post,
            Protocol::Query {
                action: Action::GetQueueUrl,
                params: pairs(&[
                    ("Action", "GetQueueUrl"),
                    ("Version", "2012-11-05"),
                    ("QueueName", "orders")
                ])
            }
        );
        let unknown = detect(
            &Method::GET,
            "/",
            Some("Action=FooBar"),
            &HeaderMap::new(),
            b"",
        );
        assert_eq!(
            unknown,
            Protocol::Refused {
                wire: Wire::Query,
                error: SqsError::invalid_action("FooBar")
            }
        );
    }

    #[test]
    fn a_queue_path_supplies_the_queue_url_unless_a_parameter_names_one() {
        let from_path = detect(
            &Method::GET,
            "/000000000000/orders",
            Some("Action=ReceiveMessage"),
            &HeaderMap::new(),
            b"",
        );
        assert_eq!(
            from_path,
            Protocol::Query {
                action: Action::ReceiveMessage,
                params: pairs(&[
                    ("Action", "ReceiveMessage"),
                    ("QueueUrl", "/000000000000/orders")
                ])
            }
        );
        let param_wins = detect(
            &Method::POST,
            "/000000000000/orders",
            None,
            &headers(&[FORM]),
            b"Action=PurgeQueue&QueueUrl=other",
        );
        assert_eq!(
            param_wins,
            Protocol::Query {
                action: Action::PurgeQueue,
                params: pairs(&[("Action", "PurgeQueue"), ("QueueUrl", "other")])
            }
        );
        let create = detect(
            &Method::GET,
            "/000000000000/orders",
            Some("Action=CreateQueue&QueueName=x"),
            &HeaderMap::new(),
            b"",
        );
        assert_eq!(
            create,
            Protocol::Refused {
                wire: Wire::Query,
                error: SqsError::invalid_action("CreateQueue")
            }
        );
    }

    #[test]
    fn no_action_is_unknown_operation_on_a_queue_path_and_missing_action_on_post() {
        let Protocol::Refused { wire, error } = detect(
            &Method::GET,
            "/000000000000/orders",
            None,
            &HeaderMap::new(),
            b"",
        ) else {
            panic!("not refused")
        };
        assert_eq!(
            (wire, error.kind),
            (Wire::Query, ErrorKind::UnknownOperation)
        );
        assert_eq!(
            detect(
                &Method::POST,
                "/",
                None,
                &headers(&[FORM]),
                b"Version=2012-11-05"
            ),
            Protocol::Refused {
                wire: Wire::Query,
                error: SqsError::missing_action()
            }
        );
    }

    #[test]
    fn the_dashboard_keeps_get_slash_unless_it_is_signed_or_names_an_action() {
        assert_eq!(
            detect(&Method::GET, "/", None, &HeaderMap::new(), b""),
            Protocol::NotSqs
        );
        assert_eq!(
            detect(
                &Method::GET,
                "/",
                Some("tab=queues"),
                &HeaderMap::new(),
                b""
            ),
            Protocol::NotSqs
        );
        assert_eq!(
            detect(&Method::GET, "/", None, &headers(&[SIGNED]), b""),
            Protocol::Refused {
                wire: Wire::Query,
                error: SqsError::missing_action()
            }
        );
        assert_eq!(
            detect(
                &Method::GET,
                "/",
                None,
                &headers(&[("authorization", "Bearer token")]),
                b""
            ),
            Protocol::NotSqs
        );
    }

    #[test]
    fn sluice_routes_are_not_sqs() {
        let json = headers(&[("content-type", "application/json")]);
        for (method, path) in [
            (Method::GET, "/ui/queues"),
            (Method::POST, "/ui/login"),
            (Method::GET, "/metrics"),
            (Method::GET, "/healthz"),
            (Method::POST, "/v1/queues/orders/messages"),
            (Method::GET, "/v1/queues"),
        ] {
            assert_eq!(
                detect(&method, path, Some("Action=ListQueues"), &json, b"{}"),
                Protocol::NotSqs,
                "{path}"
            );
        }
        assert_eq!(
            detect(
                &Method::DELETE,
                "/",
                Some("Action=ListQueues"),
                &HeaderMap::new(),
                b""
            ),
            Protocol::NotSqs
        );
    }

    /// Issue 30, finding 1: a name of thousands of `.` built a tree as deep, whose recursive
    /// drop overflowed a worker's stack and aborted the server, before any signature check.
    #[test]
    fn deep_names_and_too_many_parameters_are_refused_before_any_tree_is_built() {
        let deep = format!("Action=ListQueues&{}=x", ".".repeat(30_000));
        let refused = |protocol: Protocol| match protocol {
            Protocol::Refused { wire, error } => {
                assert_eq!(wire, Wire::Query);
                assert_eq!(error.kind, ErrorKind::InvalidParameterValue);
                error.message
            }
            other => panic!("not refused: {other:?}"),
        };
        let message = refused(detect(
            &Method::GET,
            "/",
            Some(&deep),
            &HeaderMap::new(),
            b"",
        ));
        assert!(message.contains("more than 8"), "{message}");
        let message = refused(detect(
            &Method::POST,
            "/",
            None,
            &HeaderMap::new(),
            deep.as_bytes(),
        ));
        assert!(message.contains("more than 8"), "{message}");

        let deepest_defined =
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringListValue.1";
        let ok = format!("Action=ListQueues&{deepest_defined}=x");
        assert!(matches!(
            detect(&Method::GET, "/", Some(&ok), &HeaderMap::new(), b""),
            Protocol::Query { .. }
        ));

        let many = |n: usize| {
            let mut text = "Action=ListQueues".to_owned();
            for i in 1..n {
                text.push_str(&format!("&P{i}=x"));
            }
            text
        };
        assert!(matches!(
            detect(
                &Method::POST,
                "/",
                None,
                &HeaderMap::new(),
                many(QUERY_PARAMETERS_MAX).as_bytes()
            ),
            Protocol::Query { .. }
        ));
        let message = refused(detect(
            &Method::POST,
            "/",
            Some("Version=2012-11-05"),
            &HeaderMap::new(),
            many(QUERY_PARAMETERS_MAX).as_bytes(),
        ));
        assert!(message.contains("at most 1000"), "{message}");
        // The dashboard's `GET /` with no action stays the dashboard's whatever its query.
        let dashboard = many(QUERY_PARAMETERS_MAX + 1).replacen("Action=ListQueues", "a=b", 1);
        assert_eq!(
            detect(&Method::GET, "/", Some(&dashboard), &HeaderMap::new(), b""),
            Protocol::NotSqs
        );
        // Empty pieces are not parameters: `&&&&` costs nothing and counts nothing.
        let empties = format!("Action=ListQueues{}", "&".repeat(100_000));
        assert!(matches!(
            detect(
                &Method::POST,
                "/",
                None,
                &HeaderMap::new(),
                empties.as_bytes()
            ),
            Protocol::Query { .. }
        ));
    }
}
