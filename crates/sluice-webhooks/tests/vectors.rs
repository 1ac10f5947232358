//! Webhook requests signed by the senders' own libraries (see `vectors/generate.py`, which writes
//! the checked-in `vectors/vectors.json`; Python is not needed to run this test).
//!
//! Every case is checked as given (`expect`), and from every accepted case the refusals a correct
//! verifier must produce are derived: tampered body, wrong secret, missing headers, stale and
//! future timestamps, plus rotation (the signing secret second or first among several).

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use sluice_webhooks::sign::StandardSigner;
use sluice_webhooks::verify::{Request, Scheme, Verifier, VerifyError};

#[derive(Debug, Deserialize)]
struct File {
    libraries: serde_json::Map<String, serde_json::Value>,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    scheme: Scheme,
    secrets: Vec<String>,
    wrong_secret: Option<String>,
    tolerance_s: i64,
    now: i64,
    timestamp: Option<i64>,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
    required_headers: Vec<String>,
    expect: String,
    tampered_body_code: String,
    checked_by_official_verifier: bool,
}

fn load() -> File {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/vectors.json");
    let text = std::fs::read_to_string(path).expect("read vectors.json");
    serde_json::from_str(&text).expect("parse vectors.json")
}

fn header_map(pairs: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

impl Case {
    fn run_with(
        &self,
        secrets: &[String],
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<(), VerifyError> {
        let verifier = Verifier::new(self.scheme.clone(), secrets.to_vec(), self.tolerance_s)
            .unwrap_or_else(|e| panic!("{}: verifier: {e}", self.name));
        verifier.verify(
            &Request {
                url: &self.url,
                headers,
                body,
            },
            now,
        )
    }

    fn run(&self) -> Result<(), VerifyError> {
        self.run_with(
            &self.secrets,
            &header_map(&self.headers),
            self.body.as_bytes(),
            self.now,
        )
    }

    fn expect_code(&self, what: &str, result: Result<(), VerifyError>, code: &str) {
        match result {
            Ok(()) => panic!("{}: {what}: accepted, expected {code}", self.name),
            Err(e) => {
                assert_eq!(e.code(), code, "{}: {what}: {e}", self.name);
                self.assert_no_secret_in(&e);
            }
        }
    }

    /// The message never echoes a secret or any signature-looking value from the request.
    fn assert_no_secret_in(&self, error: &VerifyError) {
        let message = error.to_string();
        for secret in self.secrets.iter().chain(&self.wrong_secret) {
            assert!(
                !message.contains(secret.as_str()),
                "{}: message contains a secret: {message}",
                self.name
            );
        }
        let longest_token = message
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='))
            .map(str::len)
            .max()
            .unwrap_or(0);
        assert!(
            longest_token < 20,
            "{}: message contains a long encoded value: {message}",
            self.name
        );
    }
}

#[test]
fn vectors_were_made_by_the_senders_libraries() {
    let file = load();
    for library in ["standardwebhooks", "stripe", "slack-sdk", "twilio"] {
        assert!(file.libraries.contains_key(library), "{library}");
    }
    // Each scheme is represented by at least one accepted case.
    for scheme in sluice_webhooks::verify::SCHEME_NAMES {
        assert!(
            file.cases
                .iter()
                .any(|c| c.scheme.name() == scheme && c.expect == "ok"),
            "no accepted vector for {scheme}"
        );
    }
    // The schemes with an official verifier were cross-checked with it when generating.
    for case in &file.cases {
        let has_verifier = matches!(
            case.scheme,
            Scheme::StandardWebhooks | Scheme::Stripe | Scheme::Slack | Scheme::Twilio
        );
        assert_eq!(
            case.checked_by_official_verifier, has_verifier,
            "{}",
            case.name
        );
    }
}

#[test]
fn cases_give_the_expected_verdict() {
    for case in load().cases {
        match case.expect.as_str() {
            "ok" => {
                if let Err(e) = case.run() {
                    panic!("{}: refused: {e} ({})", case.name, e.code());
                }
            }
            code => case.expect_code("as given", case.run(), code),
        }
    }
}

#[test]
fn tampered_body_is_refused() {
    for case in load().cases.iter().filter(|c| c.expect == "ok") {
        let headers = header_map(&case.headers);
        let mut appended = case.body.clone().into_bytes();
        appended.push(b' ');
        case.expect_code(
            "body with a byte appended",
            case.run_with(&case.secrets, &headers, &appended, case.now),
            &case.tampered_body_code,
        );
        if !case.body.is_empty() {
            let mut flipped = case.body.clone().into_bytes();
            flipped[0] ^= 0x01;
            case.expect_code(
                "body with a bit flipped",
                case.run_with(&case.secrets, &headers, &flipped, case.now),
                &case.tampered_body_code,
            );
        }
    }
}

#[test]
fn wrong_secret_is_refused_and_rotation_accepted() {
    for case in load().cases.iter().filter(|c| c.expect == "ok") {
        let wrong = case
            .wrong_secret
            .clone()
            .unwrap_or_else(|| panic!("{}: accepted case without wrong_secret", case.name));
        assert!(!case.secrets.contains(&wrong), "{}", case.name);
        let headers = header_map(&case.headers);
        let body = case.body.as_bytes();
        case.expect_code(
            "wrong secret",
            case.run_with(std::slice::from_ref(&wrong), &headers, body, case.now),
            "signature_mismatch",
        );
        // Rotation: the signing secret(s) after, or before, a secret that did not sign.
        for secrets in [
            [vec![wrong.clone()], case.secrets.clone()].concat(),
            [case.secrets.clone(), vec![wrong.clone()]].concat(),
        ] {
            assert_eq!(
                case.run_with(&secrets, &headers, body, case.now),
                Ok(()),
                "{}: rotation {} secrets",
                case.name,
                secrets.len()
            );
        }
    }
}

#[test]
fn missing_headers_are_refused() {
    for case in load().cases.iter().filter(|c| c.expect == "ok") {
        assert!(!case.required_headers.is_empty(), "{}", case.name);
        for required in &case.required_headers {
            let mut headers = header_map(&case.headers);
            assert!(
                headers.remove(required.as_str()).is_some(),
                "{}: {required} not in the vector",
                case.name
            );
            let result = case.run_with(&case.secrets, &headers, case.body.as_bytes(), case.now);
            case.expect_code(
                &format!("without {required}"),
                result.clone(),
                "missing_header",
            );
            // Standard Webhooks headers may come under Svix's names too; the error names both.
            let named = match required.strip_prefix("webhook-") {
                Some(rest) => format!("{required} (or svix-{rest})"),
                None => required.clone(),
            };
            assert_eq!(
                result,
                Err(VerifyError::MissingHeader { header: named }),
                "{}",
                case.name
            );
        }
        // Headers that are not required can go: nothing else is signed.
        let mut only_required = HeaderMap::new();
        for (name, value) in header_map(&case.headers).iter() {
            if case.required_headers.iter().any(|r| r == name.as_str())
                || name == "x-twilio-webhooks-signature-settings"
            {
                only_required.append(name.clone(), value.clone());
            }
        }
        assert_eq!(
            case.run_with(
                &case.secrets,
                &only_required,
                case.body.as_bytes(),
                case.now
            ),
            Ok(()),
            "{}: with the required headers only",
            case.name
        );
    }
}

#[test]
fn timestamps_outside_the_tolerance_are_refused() {
    let mut timestamped = 0;
    for case in load().cases.iter().filter(|c| c.expect == "ok") {
        let headers = header_map(&case.headers);
        let body = case.body.as_bytes();
        let Some(ts) = case.timestamp else {
            assert!(!case.scheme.has_timestamp(), "{}", case.name);
            // Untimestamped schemes do not care about the clock.
            for now in [0, case.now + 86_400 * 365, i64::MAX] {
                assert_eq!(case.run_with(&case.secrets, &headers, body, now), Ok(()));
            }
            continue;
        };
        assert!(case.scheme.has_timestamp(), "{}", case.name);
        timestamped += 1;
        let tol = case.tolerance_s;
        for now in [ts - tol, ts + tol] {
            assert_eq!(
                case.run_with(&case.secrets, &headers, body, now),
                Ok(()),
                "{}: at the edge of the window (now {now})",
                case.name
            );
        }
        for (what, now) in [("stale", ts + tol + 1), ("from the future", ts - tol - 1)] {
            let result = case.run_with(&case.secrets, &headers, body, now);
            case.expect_code(what, result.clone(), "timestamp_out_of_tolerance");
            assert_eq!(
                result,
                Err(VerifyError::TimestampOutOfTolerance {
                    timestamp: ts,
                    now,
                    tolerance_s: tol
                })
            );
        }
        // A tighter tolerance moves the edge.
        let verifier = Verifier::new(case.scheme.clone(), case.secrets.clone(), 10).unwrap();
        let request = Request {
            url: &case.url,
            headers: &headers,
            body,
        };
        assert_eq!(verifier.verify(&request, ts + 10), Ok(()), "{}", case.name);
        assert_eq!(
            verifier.verify(&request, ts + 11).unwrap_err().code(),
            "timestamp_out_of_tolerance",
            "{}",
            case.name
        );
    }
    assert!(timestamped >= 3);
}

#[test]
fn standard_webhooks_signer_reproduces_the_library() {
    // sluice's own push signer produces, header for header, what the Python library produced.
    let mut checked = 0;
    for case in load()
        .cases
        .iter()
        .filter(|c| c.name == "standard_webhooks")
    {
        let signer = StandardSigner::new(&case.secrets[0]).unwrap();
        let get = |name: &str| {
            case.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        let msg_id = get("webhook-id");
        let ts: i64 = get("webhook-timestamp").parse().unwrap();
        let produced = signer.headers(&msg_id, ts, case.body.as_bytes());
        assert_eq!(
            produced.map(|(n, v)| (n.to_string(), v)).to_vec(),
            case.headers
        );
        checked += 1;
    }
    assert_eq!(checked, 1);
}
