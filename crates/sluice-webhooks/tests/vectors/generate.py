#!/usr/bin/env python3
"""Generate vectors.json: webhook requests signed by the senders' own libraries.

The Rust test (../vectors.rs) reads only the JSON, which is checked in; Python is needed only to
regenerate it. To regenerate (from this directory):

    python3 -m venv /tmp/whvenv
    /tmp/whvenv/bin/pip install standardwebhooks stripe slack-sdk twilio
    /tmp/whvenv/bin/python generate.py > vectors.json

Versions used for the checked-in file: standardwebhooks 1.1.0, stripe 16.1.0, slack-sdk 3.48.0,
twilio 9.13.0 (recorded in the JSON). The output is deterministic: fixed secrets, ids and timestamps.

Who signs what:
- Standard Webhooks: `standardwebhooks.Webhook(secret).sign(msg_id, datetime, body)`.
- Stripe: `stripe.WebhookSignature.generate_signature_header(payload, secret, timestamp=)`.
- Slack: `slack_sdk.signature.SignatureVerifier(secret).generate_signature(timestamp=, body=)`.
- Twilio: `twilio.request_validator.RequestValidator(token).compute_signature(url, params,
  algorithm=)` and `.compute_hash(body)` for the `bodySHA256` query parameter.
- GitHub, Shopify, PagerDuty and generic HMAC: the stdlib `hmac`. These senders publish no signing
  library (GitHub's is npm-only, `@octokit/webhooks-methods`; Shopify's Python ShopifyAPI and
  PagerDuty's Python packages only verify, or are REST clients), and their schemes are a plain HMAC of
  the raw body.

Every case is also run through the sender's official *verifier* where one exists (standardwebhooks
with a pinned clock, stripe.WebhookSignature.verify_header, slack SignatureVerifier.is_valid with a
pinned clock, twilio RequestValidator.validate), and the script fails if the official verdict
differs from the case's `expect`. So `expect` values are not our opinion of the scheme.

Case fields (see vectors.rs): name, scheme (the config form, VerifySpec), secrets, wrong_secret
(a well-formed secret that did not sign), tolerance_s, now, timestamp (the signed timestamp, or
null), url, headers ([name, value] pairs), body (UTF-8 text), required_headers (lowercase names
whose absence must give missing_header), expect ("ok" or an error code), tampered_body_code (the
code a changed body must give; signature_mismatch unless noted). The Rust test derives the
refusals (tampered body, wrong secret, rotation, missing headers, stale and future timestamps)
from every case whose expect is "ok".
"""

import base64
import hashlib
import hmac
import json
import sys
from datetime import datetime, timezone
from importlib.metadata import version
from urllib.parse import parse_qsl, urlencode

import slack_sdk.signature
import standardwebhooks.webhooks
import stripe
from twilio.request_validator import RequestValidator, get_signature_algorithm

TOLERANCE = 300
T0 = 1700000000  # fixed "now" and signing time

cases = []


def add(case):
    case.setdefault("tolerance_s", TOLERANCE)
    case.setdefault("now", T0)
    case.setdefault("timestamp", None)
    case.setdefault("url", "https://hooks.example.com/ingest/src")
    case.setdefault("expect", "ok")
    case.setdefault("tampered_body_code", "signature_mismatch")
    case.setdefault("wrong_secret", None)
    case.setdefault("required_headers", [])
    verdict = official_accepts(case)
    if verdict is not None and verdict != (case["expect"] == "ok"):
        sys.exit(f"official verifier disagrees on {case['name']}: accepts={verdict}")
    case["checked_by_official_verifier"] = verdict is not None
    cases.append(case)


# ---------------------------------------------------------------- official verifiers


class _FixedDatetime(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(T0_OVERRIDE[0], tz=tz)


T0_OVERRIDE = [T0]


def official_accepts(case):
    """True/False from the sender's own verifier, or None if the sender has no verifier."""
    scheme = case["scheme"]["scheme"]
    headers = {k: v for k, v in case["headers"]}
    lower = {k.lower(): v for k, v in case["headers"]}
    body = case["body"]
    secrets = case["secrets"]
    if scheme == "standard_webhooks":
        T0_OVERRIDE[0] = case["now"]
        real = standardwebhooks.webhooks.datetime
        standardwebhooks.webhooks.datetime = _FixedDatetime
        try:
            ok = False
            for secret in secrets:
                try:
                    standardwebhooks.webhooks.Webhook(secret).verify(body, headers, json_parse=False)
                    ok = True
                except standardwebhooks.webhooks.WebhookVerificationError:
                    pass
            return ok
        finally:
            standardwebhooks.webhooks.datetime = real
    if scheme == "stripe":
        ok = False
        for secret in secrets:
            try:
                # tolerance=None: the library only checks age against the wall clock; the
                # timestamp window is covered by the Rust test with a pinned now.
                stripe.WebhookSignature.verify_header(body, lower["stripe-signature"], secret, None)
                ok = True
            except stripe.SignatureVerificationError:
                pass
        return ok

    if scheme == "slack":

        class Clock(slack_sdk.signature.Clock):
            def now(self):
                return case["now"]

        return any(
            slack_sdk.signature.SignatureVerifier(s, clock=Clock()).is_valid_request(body, headers)
            for s in secrets
        )
    if scheme == "twilio":
        algorithm = get_signature_algorithm(lower.get("x-twilio-webhooks-signature-settings"))
        params = body if "bodySHA256=" in case["url"] else MultiDict(parse_qsl(body))
        return any(
            RequestValidator(s).validate(
                case["url"], params, lower["x-twilio-signature"], algorithm=algorithm
            )
            for s in secrets
        )
    return None


class MultiDict(dict):
    """A form as frameworks hand it to twilio's validator: repeated names keep all values."""

    def __init__(self, pairs):
        super().__init__()
        self._lists = {}
        for name, value in pairs:
            self._lists.setdefault(name, []).append(value)
            self[name] = value

    def getlist(self, name):
        return self._lists[name]


# ---------------------------------------------------------------- helpers


def b64(raw):
    return base64.b64encode(raw).decode()


def hmac_digest(algorithm, secret, body):
    return hmac.new(secret.encode(), body.encode(), algorithm).digest()


def std_sign(secret, msg_id, ts, body):
    return standardwebhooks.webhooks.Webhook(secret).sign(
        msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body
    )


def stripe_header(secret, ts, body):
    return stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=ts)


def slack_sign(secret, ts, body):
    return slack_sdk.signature.SignatureVerifier(secret).generate_signature(
        timestamp=str(ts), body=body
    )


# ---------------------------------------------------------------- Standard Webhooks

STD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the spec's example secret
STD_OTHER = "whsec_" + b64(bytes(range(1, 33)))
STD_OLD = "whsec_" + b64(b"sluice-old-standard-webhooks-key")
STD_DECOY = "whsec_" + b64(b"a key that signs decoy signatures")
STD_HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature"]


def std_case(name, secrets, signer, body, msg_id="msg_2bTnUMxJmwuWRw6uUo7EzdB3bPa", extra=None):
    sig = std_sign(signer, msg_id, T0, body)
    if extra is not None:
        sig = extra(sig)
    add(
        {
            "name": name,
            "scheme": {"scheme": "standard_webhooks"},
            "secrets": secrets,
            "wrong_secret": STD_OTHER,
            "timestamp": T0,
            "headers": [
                ["webhook-id", msg_id],
                ["webhook-timestamp", str(T0)],
                ["webhook-signature", sig],
            ],
            "body": body,
            "required_headers": STD_HEADERS,
        }
    )


std_case("standard_webhooks", [STD_SECRET], STD_SECRET, '{"type":"invoice.paid","data":{"id":42}}')
std_case(
    "standard_webhooks_bare_base64_secret",
    [STD_SECRET.removeprefix("whsec_")],
    STD_SECRET,
    '{"type":"ping"}',
)
std_case(
    "standard_webhooks_utf8_body",
    [STD_SECRET],
    STD_SECRET,
    '{"name":"caf\u00e9 \u2615","emoji":"\U0001f680"}',
)
std_case(
    "standard_webhooks_rotation_second_secret_signed",
    [STD_OLD, STD_SECRET],
    STD_SECRET,
    '{"type":"rotated"}',
)
# Several space-separated signatures: an ed25519 one (v1a, skipped), one by another key, the good one.
std_case(
    "standard_webhooks_several_signatures",
    [STD_SECRET],
    STD_SECRET,
    '{"type":"multi"}',
    extra=lambda good: " ".join(
        [
            "v1a," + b64(bytes(64)),
            std_sign(STD_DECOY, "msg_2bTnUMxJmwuWRw6uUo7EzdB3bPa", T0, '{"type":"multi"}'),
            good,
        ]
    ),
)
body = '{"type":"wrong"}'
add(
    {
        "name": "standard_webhooks_signed_by_other_key",
        "scheme": {"scheme": "standard_webhooks"},
        "secrets": [STD_SECRET],
        "timestamp": T0,
        "headers": [
            ["webhook-id", "msg_x"],
            ["webhook-timestamp", str(T0)],
            ["webhook-signature", std_sign(STD_OTHER, "msg_x", T0, body)],
        ],
        "body": body,
        "expect": "signature_mismatch",
    }
)

# ---------------------------------------------------------------- Stripe

STRIPE_SECRET = "whsec_sluiceStripeTestSecret0123456789"
STRIPE_OTHER = "whsec_sluiceStripeOtherSecret987654321"
STRIPE_DECOY = "whsec_sluiceStripeDecoySecret"
STRIPE_BODY = '{"id":"evt_1Sluice","object":"event","type":"payment_intent.succeeded"}'


def stripe_case(name, secrets, header, body=STRIPE_BODY, expect="ok"):
    add(
        {
            "name": name,
            "scheme": {"scheme": "stripe"},
            "secrets": secrets,
            "wrong_secret": STRIPE_OTHER,
            "timestamp": T0,
            "headers": [["Stripe-Signature", header]],
            "body": body,
            "required_headers": ["stripe-signature"],
            "expect": expect,
        }
    )


good = stripe_header(STRIPE_SECRET, T0, STRIPE_BODY)
other_v1 = stripe_header(STRIPE_DECOY, T0, STRIPE_BODY).split(",")[1]  # "v1=<hex>"
stripe_case("stripe", [STRIPE_SECRET], good)
stripe_case(
    "stripe_rotation_second_secret_signed",
    ["whsec_sluiceStripeRetiredSecret", STRIPE_SECRET],
    good,
)
# Two v1 entries (Stripe sends one per active secret while rolling), one matching, plus a v0.
stripe_case(
    "stripe_two_v1_one_matching",
    [STRIPE_SECRET],
    f"t={T0},{other_v1},{good.split(',')[1]},v0=" + "ab" * 32,
)
# The right MAC labelled v0 does not count: only v1 entries are compared.
stripe_case(
    "stripe_matching_mac_only_as_v0",
    [STRIPE_SECRET],
    f"t={T0},{other_v1},v0=" + good.split(",")[1].removeprefix("v1="),
    expect="signature_mismatch",
)

# ---------------------------------------------------------------- Slack

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_OTHER = "0123456789abcdef0123456789abcdef"
SLACK_HEADERS = ["x-slack-request-timestamp", "x-slack-signature"]


def slack_case(name, body):
    add(
        {
            "name": name,
            "scheme": {"scheme": "slack"},
            "secrets": [SLACK_SECRET],
            "wrong_secret": SLACK_OTHER,
            "timestamp": T0,
            "headers": [
                ["X-Slack-Request-Timestamp", str(T0)],
                ["X-Slack-Signature", slack_sign(SLACK_SECRET, T0, body)],
            ],
            "body": body,
            "required_headers": SLACK_HEADERS,
        }
    )


slack_case(
    "slack_form",
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fweather&text=94070",
)
slack_case("slack_json", '{"type":"event_callback","event_id":"Ev01","event":{"text":"h\u00e9"}}')

# ---------------------------------------------------------------- GitHub (stdlib hmac)

GH_SECRET = "It's a Secret to Everybody"


def github_case(name, body, content_type):
    add(
        {
            "name": name,
            "scheme": {"scheme": "github"},
            "secrets": [GH_SECRET],
            "wrong_secret": "It's a Secret to Nobody",
            "headers": [
                ["X-GitHub-Event", "push"],
                ["X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"],
                ["Content-Type", content_type],
                [
                    "X-Hub-Signature-256",
                    "sha256=" + hmac_digest(hashlib.sha256, GH_SECRET, body).hex(),
                ],
            ],
            "body": body,
            "required_headers": ["x-hub-signature-256"],
        }
    )


github_case("github_json", '{"ref":"refs/heads/main","after":"abc"}', "application/json")
github_case(
    "github_form",
    urlencode({"payload": '{"ref":"refs/heads/main","after":"abc"}'}),
    "application/x-www-form-urlencoded",
)

# ---------------------------------------------------------------- Shopify (stdlib hmac)

SHOPIFY_SECRET = "shpss_sluice_test_client_secret"
body = '{"id":820982911946154500,"email":"jon@example.com","note":"caf\u00e9"}'
add(
    {
        "name": "shopify",
        "scheme": {"scheme": "shopify"},
        "secrets": [SHOPIFY_SECRET],
        "wrong_secret": "shpss_other",
        "headers": [
            ["X-Shopify-Topic", "orders/create"],
            ["X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"],
            ["X-Shopify-Hmac-Sha256", b64(hmac_digest(hashlib.sha256, SHOPIFY_SECRET, body))],
        ],
        "body": body,
        "required_headers": ["x-shopify-hmac-sha256"],
    }
)

# ---------------------------------------------------------------- PagerDuty v3 (stdlib hmac)

PD_SECRET = "pd_sluice_new_secret"
PD_OLD = "pd_sluice_old_secret"
body = '{"event":{"id":"01DEN1HNLBC1VITYCLBL1R6B5Q","event_type":"incident.triggered"}}'


def pd_sig(secret):
    return "v1=" + hmac_digest(hashlib.sha256, secret, body).hex()


for name, header in [
    ("pagerduty", pd_sig(PD_SECRET)),
    # During a secret rotation PagerDuty sends one v1 per active secret.
    ("pagerduty_one_v1_per_active_secret", f"{pd_sig(PD_OLD)},{pd_sig(PD_SECRET)}"),
]:
    add(
        {
            "name": name,
            "scheme": {"scheme": "pagerduty"},
            "secrets": [PD_SECRET],
            "wrong_secret": "pd_other",
            "headers": [["X-PagerDuty-Signature", header]],
            "body": body,
            "required_headers": ["x-pagerduty-signature"],
        }
    )

# ---------------------------------------------------------------- Twilio

TW_TOKEN = "sluice_twilio_auth_token_0123456"
TW_OTHER = "another_twilio_auth_token_98765"
TW_SMS = [
    ("MessageSid", "SM0123456789abcdef0123456789abcdef"),
    ("AccountSid", "AC0123456789abcdef0123456789abcdef"),
    ("From", "+15551234567"),
    ("To", "+15557654321"),
    ("Body", "Hello w\u00f6rld +1 & more"),
    # Repeated names: the validator signs every value, sorted.
    ("MediaUrl", "https://example.com/b.png"),
    ("MediaUrl", "https://example.com/a.png"),
    ("NumMedia", "2"),
]


def twilio_case(name, request_url, signed_url, pairs=None, json_body=None, algorithm=None, expect="ok"):
    validator = RequestValidator(TW_TOKEN)
    headers = [["I-Twilio-Idempotency-Token", "b1b2c3d4-idem"]]
    if json_body is not None:
        body_hash = validator.compute_hash(json_body)
        sep = "&" if "?" in signed_url else "?"
        signed_url = f"{signed_url}{sep}bodySHA256={body_hash}"
        request_url = f"{request_url}{sep}bodySHA256={body_hash}"
        sig = validator.compute_signature(signed_url, {}, algorithm=algorithm)
        body = json_body if expect != "body_hash_mismatch" else json_body.replace("1", "2")
        headers.append(["Content-Type", "application/json"])
    else:
        pairs = pairs or []
        sig = validator.compute_signature(signed_url, MultiDict(pairs), algorithm=algorithm)
        body = urlencode(pairs)
        if pairs:
            headers.append(["Content-Type", "application/x-www-form-urlencoded"])
    headers.append(["X-Twilio-Signature", sig])
    if algorithm is not None:
        headers.append(
            ["X-Twilio-Webhooks-Signature-Settings", f"key=webhooks_sharedkey_01,algorithm={algorithm}"]
        )
    add(
        {
            "name": name,
            "scheme": {"scheme": "twilio"},
            "secrets": [TW_TOKEN],
            "wrong_secret": TW_OTHER,
            "url": request_url,
            "headers": headers,
            "body": body,
            "required_headers": ["x-twilio-signature"],
            "expect": expect,
            "tampered_body_code": "body_hash_mismatch" if json_body is not None else "signature_mismatch",
        }
    )


SMS_URL = "https://hooks.example.com/twilio/sms?source=acme&x=1"
twilio_case("twilio_form", SMS_URL, SMS_URL, TW_SMS)
twilio_case(
    "twilio_form_signed_with_default_port",
    SMS_URL,
    "https://hooks.example.com:443/twilio/sms?source=acme&x=1",
    TW_SMS,
)
twilio_case(
    "twilio_form_request_url_has_default_port",
    "https://hooks.example.com:443/twilio/sms?source=acme&x=1",
    SMS_URL,
    TW_SMS,
)
twilio_case(
    "twilio_form_http_port_80",
    "http://hooks.example.com/twilio/sms",
    "http://hooks.example.com:80/twilio/sms",
    TW_SMS,
)
twilio_case("twilio_get_without_body", SMS_URL + "&CallSid=CA01", SMS_URL + "&CallSid=CA01")
JSON_URL = "https://hooks.example.com/twilio/events"
TW_JSON = '{"specversion":"1.0","type":"com.twilio.messaging.message.delivered","id":"EZ01"}'
twilio_case("twilio_json_body_sha256", JSON_URL, JSON_URL, json_body=TW_JSON)
twilio_case(
    "twilio_json_body_sha256_signed_with_default_port",
    JSON_URL,
    "https://hooks.example.com:443/twilio/events",
    json_body=TW_JSON,
)
twilio_case(
    "twilio_json_wrong_body",
    JSON_URL,
    JSON_URL,
    json_body=TW_JSON,
    expect="body_hash_mismatch",
)
twilio_case("twilio_form_hmac_sha256_shared_key", SMS_URL, SMS_URL, TW_SMS, algorithm="HMAC_SHA256")
twilio_case(
    "twilio_signed_for_other_url",
    SMS_URL,
    "https://hooks.example.com/twilio/other",
    TW_SMS,
    expect="signature_mismatch",
)

# ---------------------------------------------------------------- generic HMAC (stdlib hmac)

GEN_SECRET = "sluice-generic-secret"
body = '{"event":"thing.happened","id":"evt_77"}'
for name, spec, algorithm, encode in [
    (
        "hmac_sha256_hex_default",
        {"scheme": "hmac", "header": "X-Webhook-Signature"},
        hashlib.sha256,
        lambda d: d.hex(),
    ),
    (
        "hmac_sha1_hex_prefix",
        {"scheme": "hmac", "header": "X-Hub-Signature", "algorithm": "sha1", "prefix": "sha1="},
        hashlib.sha1,
        lambda d: "sha1=" + d.hex(),
    ),
    (
        "hmac_sha512_base64",
        {"scheme": "hmac", "header": "X-Signature", "algorithm": "sha512", "encoding": "base64"},
        hashlib.sha512,
        b64,
    ),
]:
    add(
        {
            "name": name,
            "scheme": spec,
            "secrets": [GEN_SECRET],
            "wrong_secret": "not-the-generic-secret",
            "headers": [[spec["header"], encode(hmac_digest(algorithm, GEN_SECRET, body))]],
            "body": body,
            "required_headers": [spec["header"].lower()],
        }
    )

json.dump(
    {
        "generated_by": "tests/vectors/generate.py",
        "libraries": {
            name: version(name) for name in ["standardwebhooks", "stripe", "slack-sdk", "twilio"]
        },
        "cases": cases,
    },
    sys.stdout,
    indent=2,
    ensure_ascii=False,
)
sys.stdout.write("\n")
