//! Property-based fuzzing of what a webhook sender and an operator control: signature headers
//! (every scheme, against arbitrary header values, bodies and URLs) and jq programs (the
//! compiler on arbitrary text, the evaluator on programs built from jq's grammar).
//!
//! Properties: nothing panics; a forged request is refused; a compiled program either answers
//! or fails with a message. Runs `SLUICE_FUZZ_CASES` cases per property (default 256, which
//! takes seconds); the long run is documented in docs/testing.md:
//! `SLUICE_FUZZ_CASES=200000 cargo test --release -p sluice-webhooks --test fuzz`.

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use serde_json::{Value, json};
use sluice_webhooks::expr::Expr;
use sluice_webhooks::verify::{Request, SCHEME_NAMES, Scheme, Verifier, VerifySpec};

fn config() -> ProptestConfig {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    ProptestConfig::with_cases(cases.unwrap_or(256))
}

/// Every header any scheme reads, plus the generic HMAC scheme's own.
const SIGNATURE_HEADERS: &[&str] = &[
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-hub-signature-256",
    "x-github-delivery",
    "stripe-signature",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "x-shopify-hmac-sha256",
    "x-pagerduty-signature",
    "x-twilio-signature",
    "x-signature",
    "content-type",
];

/// Header values shaped like the schemes' own (so the parsers get past their first check),
/// mixed with arbitrary bytes.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        "[ -~]{0,80}".prop_map(String::into_bytes),
        ("[0-9]{0,12}", "[0-9a-f]{0,70}")
            .prop_map(|(t, hex)| format!("t={t},v1={hex},v0={hex}").into_bytes()),
        "(v1,|v1a,|sha256=|v1=|)[A-Za-z0-9+/=]{0,60}( v1,[A-Za-z0-9+/=]{0,50})?"
            .prop_map(String::into_bytes),
        "-?[0-9]{0,20}".prop_map(String::into_bytes),
    ]
}

fn headers() -> impl Strategy<Value = HeaderMap> {
    proptest::collection::vec(
        (proptest::sample::select(SIGNATURE_HEADERS), header_value()),
        0..8,
    )
    .prop_map(|pairs| {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            if let Ok(value) = HeaderValue::from_bytes(&value) {
                map.append(HeaderName::from_static(name), value);
            }
        }
        map
    })
}

fn verifiers() -> Vec<Verifier> {
    SCHEME_NAMES
        .iter()
        .map(|name| {
            let spec = VerifySpec {
                scheme: (*name).to_owned(),
                header: (*name == "hmac").then(|| "x-signature".to_owned()),
                ..VerifySpec::default()
            };
            let scheme = Scheme::from_spec(&spec).expect("scheme");
            // Standard Webhooks secrets are base64 after `whsec_`.
            let secret = if *name == "standard_webhooks" {
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()
            } else {
                "fuzz-secret".to_owned()
            };
            Verifier::new(scheme, vec![secret], 300).expect("verifier")
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_signature_headers_never_panic_and_forgeries_are_refused(
        headers in headers(),
        body in proptest::collection::vec(any::<u8>(), 0..256),
        url in "(https?://[a-z.]{1,20}(:[0-9]{1,5})?)?(/[ -~]{0,30})?(\\?[ -~]{0,40})?",
        now in prop_oneof![Just(1_700_000_000_i64), any::<i64>()],
    ) {
        for verifier in verifiers() {
            let request = Request { url: &url, headers: &headers, body: &body };
            let outcome = verifier.verify(&request, now);
            prop_assert!(outcome.is_err(), "{} accepted a forged request", verifier.scheme().name());
            // Codes are stable strings for metrics; the message never panics to format.
            let error = outcome.unwrap_err();
            prop_assert!(!error.code().is_empty());
            let _ = error.to_string();
        }
    }

    #[test]
    fn fuzz_the_expression_compiler_never_panics(source in prop_oneof![
        "[ -~]{0,120}",
        proptest::collection::vec(proptest::sample::select(TOKENS), 0..40).prop_map(|t| t.join(" ")),
        any::<String>(),
    ]) {
        if let Err(message) = Expr::compile(&source) {
            prop_assert!(!message.is_empty());
            prop_assert!(!message.contains('\n'), "errors are one line: {message}");
        }
    }

    #[test]
    fn fuzz_the_evaluator_answers_or_fails_cleanly(
        program in proptest::collection::vec(proptest::sample::select(TOKENS), 1..24),
        input in json_value(),
    ) {
        let source = program.join(" ");
        if let Ok(expr) = Expr::compile(&source) {
            if let Err(message) = expr.run(&input) {
                prop_assert!(!message.is_empty());
            }
            let _ = expr.first(&input);
        }
    }
}

/// jq's grammar in pieces. Loops and generators that can run without bound (`def`, `recurse`,
/// `repeat`, `while`, `range`, string repetition by big numbers) are left out: the evaluator
/// runs in the test's own thread, and the server bounds those with its expression limits.
const TOKENS: &[&str] = &[
    ".",
    "..",
    ".a",
    ".b",
    ".[0]",
    ".[]",
    ".[]?",
    "|",
    ",",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    "a:",
    "\"k\":",
    "$__loc__",
    "1",
    "2",
    "0",
    "-1",
    "null",
    "true",
    "false",
    "\"s\"",
    "\"\\(.)\"",
    "+",
    "-",
    "*",
    "/",
    "%",
    "==",
    "!=",
    "<",
    ">=",
    "and",
    "or",
    "not",
    "//",
    "?",
    "if",
    "then",
    "elif",
    "else",
    "end",
    "try",
    "catch",
    "as",
    "$x",
    "reduce",
    "foreach",
    "select(.)",
    "map(.)",
    "keys",
    "length",
    "add",
    "tostring",
    "tojson",
    "fromjson",
    "tonumber",
    "type",
    "to_entries",
    "from_entries",
    "with_entries(.)",
    "ascii_downcase",
    "split(\",\")",
    "join(\",\")",
    "has(\"a\")",
    "error",
    "empty",
    "first",
    "last",
    "sort",
    "unique",
    "min",
    "max",
    "@base64",
    "@base64d",
    "@uri",
    "@csv",
    "@html",
    "paths",
    "getpath([\"a\"])",
    "del(.a)",
    "to_entries",
    "env",
    "input",
    "$ENV",
    "label $out",
    "break $out",
    "limit(2; .[])",
    "ltrimstr(\"a\")",
    "splits(\",\")",
    "test(\"a\")",
    "ascii",
    "implode",
    "explode",
    "indices(1)",
    "inside([])",
    "contains([])",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[ -~]{0,16}".prop_map(Value::from),
        "\\[{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map("[a-c]{1,2}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}
