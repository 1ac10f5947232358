//! AWS Signature Version 4 verification of SQS requests (docs/design/sqs-compat.md §2.2).
//!
//! When access control is on, the server calls [`verify`] on every SQS request: the access
//! key id names a sluice token and the token's secret is the signing secret. With access
//! control off, nothing here runs (any key is accepted, as ElasticMQ and moto do).
//!
//! What is verified, and why:
//! - the signature, recomputed from the request exactly as AWS's signers compute it (the
//!   canonical request below) and compared in constant time, so the key's secret, the method,
//!   the path, every query parameter, every header named in `SignedHeaders`, and the body are
//!   all covered;
//! - the body, through its SHA-256: computed by us, or taken from `x-amz-content-sha256` and
//!   then checked against the body, since a declared hash that is not the body's would sign
//!   something else. A declared `UNSIGNED-PAYLOAD` is accepted only for an empty body (an SQS
//!   body carries the operation, issue 30 finding 15); [`Verified::is_payload_signed`] then says the body was not covered, for a
//!   caller that wants to refuse that;
//! - that `host` is a signed header, so a request signed for one server cannot be replayed
//!   against another (every SDK signs it);
//! - the time: a header-signed request more than 15 minutes away from `now` is refused, as AWS
//!   does; a presigned URL is refused after its `X-Amz-Expires`;
//! - that the credential scope's date is the request's date, as AWS checks.
//!
//! What is not verified, and why:
//! - the scope's region and service are returned ([`Verified`]) but not enforced: the scope
//!   is part of the signed string, so it is authentic either way; sluice has one key space
//!   for one service, so a signature made for another region or service name proves the
//!   same possession of the secret. Clients pointed at sluice by `endpoint_url` sign with
//!   whatever region they are configured for, and refusing them would only break them;
//! - `X-Amz-Security-Token` (a session token): sluice tokens are long-lived keys with no
//!   session part, so it is accepted and ignored, except that when it is signed (as SDKs do)
//!   it is part of the canonical request like any other signed header;
//! - replays inside the 15-minute window: AWS does not refuse them either (SQS's own dedup
//!   covers FIFO sends, and TLS covers the rest);
//! - SigV4a (`AWS4-ECDSA-P256-SHA256`), chunked `STREAMING-*` payloads (S3 only) and
//!   SigV2: refused as an incomplete signature.
//!
//! The canonical request, per AWS's SigV4 rules for services other than S3:
//! - the path is normalised (`.` and `..` segments resolved, empty segments dropped) and then
//!   URI-encoded as it arrived, so an already-encoded `%3A` becomes `%253A` ("double
//!   encoding"): signers encode the path they send once more;
//! - the query is split into parameters, each name and value decoded (`+` as a space, as the
//!   query protocol reads them) and re-encoded per RFC 3986 (unreserved characters kept,
//!   everything else `%XX`), sorted by name and then value. The signature therefore covers
//!   the very parameters the request parser reads ([`crate::protocol::detect`]);
//! - headers: the names of `SignedHeaders`, lower-case and sorted, each with its values
//!   trimmed, inner runs of whitespace collapsed to one space, several values joined by `,`.
//!
//! The server must hand the request over as received: the raw path and query, every header
//! (under HTTP/2, `:authority` belongs in `host`), and the whole body.
//!
//! Why hand-written rather than the `aws-sigv4` crate: that crate signs, choosing itself
//! which headers to sign (it leaves out `user-agent`, `x-amzn-trace-id`, … by design), adding
//! its own `x-amz-date`, and reading the path through its own settings; a verifier must
//! follow the client's `SignedHeaders` and raw path exactly instead. Bending the signer to
//! that (and pulling in its smithy runtime) would be longer and less exact than the
//! code below. The HMAC, SHA-256 and encoding come from maintained crates.

use std::borrow::Cow;

use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, Method};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode, percent_encode};
use sha2::{Digest, Sha256};
use time::format_description::FormatItem;
use time::macros::format_description;
use time::{Duration, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::error::{ErrorKind, SqsError};

/// An HTTP request as the server received it, borrowed: nothing is copied to verify it.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    pub method: &'a Method,
    /// The path as sent, still percent-encoded (`/000000000000/orders`).
    pub path: &'a str,
    /// The raw query string, without `?`; `None` when the request has none.
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// The whole body (empty for a `GET`).
    pub body: &'a [u8],
}

/// Who signed a request that verified, and for which scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The access key id: the name of the sluice token whose secret signed the request.
    pub access_key_id: String,
    /// The region of the credential scope (`us-east-1`), as the client chose it; not enforced.
    pub region: String,
    /// The service of the credential scope (`sqs`), as the client chose it; not enforced.
    pub service: String,
    /// Whether the signature covers the body: false when the request declared
    /// `x-amz-content-sha256: UNSIGNED-PAYLOAD`.
    pub is_payload_signed: bool,
}

/// The longest distance between a header-signed request's date and `now`, either way (AWS's).
pub const CLOCK_SKEW_MAX: Duration = Duration::minutes(15);

/// The longest `X-Amz-Expires` of a presigned URL, in seconds: one week, AWS's limit.
pub const PRESIGNED_EXPIRES_MAX_SECONDS: i64 = 604_800;

/// Verifies a request's SigV4 signature, in the `Authorization` header or presigned in the
/// query string.
///
/// `secret_of` maps an access key id to its secret (`None`: no such key). `now` is the
/// server's clock.
///
/// Errors, as AWS answers them: no signature at all → `MissingAuthenticationToken`; a
/// malformed `Authorization`, credential scope or presigned parameter → `IncompleteSignature`;
/// an unknown key → `InvalidClientTokenId`; a signature that does not match, a body that does
/// not match its declared hash, a scope date that is not the request's, or a request date
/// more than 15 minutes from `now` → `SignatureDoesNotMatch`; a presigned URL past its
/// expiry → `RequestExpired`.
pub fn verify(
    request: &SignedRequest<'_>,
    secret_of: impl FnOnce(&str) -> Option<String>,
    now: OffsetDateTime,
) -> Result<Verified, SqsError> {
    let query = parse_query(request.query.unwrap_or(""));
    let auth = Authorization::find(request, &query)?;
    if auth.credential.date != &auth.timestamp[..8] {
        return Err(SqsError::new(
            ErrorKind::SignatureDoesNotMatch,
            format!(
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '{}' != '{}', from '{}'.",
                auth.credential.date,
                &auth.timestamp[..8],
                auth.timestamp
            ),
        ));
    }
    let secret = secret_of(auth.credential.access_key_id).ok_or_else(|| {
        SqsError::new(
            ErrorKind::InvalidClientTokenId,
            "The security token included in the request is invalid.",
        )
    })?;
    check_time(&auth, now)?;
    let (payload_hash, is_payload_signed) = payload_hash(request)?;
    let signature = hex::decode(auth.signature).map_err(|_| signature_does_not_match())?;
    let canonical = canonical_request(request, &query, &auth, &payload_hash);
    let string_to_sign = format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        auth.timestamp,
        auth.credential.scope(),
        hex::encode(Sha256::digest(&canonical))
    );
    let mut mac = hmac(&signing_key(&secret, &auth.credential));
    mac.update(string_to_sign.as_bytes());
    // `verify_slice` compares in constant time (`subtle`), so the time taken says nothing
    // about how many leading bytes of a forged signature were right.
    if mac.verify_slice(&signature).is_err() {
        return Err(signature_does_not_match());
    }
    Ok(Verified {
        access_key_id: auth.credential.access_key_id.to_owned(),
        region: auth.credential.region.to_owned(),
        service: auth.credential.service.to_owned(),
        is_payload_signed,
    })
}

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
/// `YYYYMMDD'T'HHMMSS'Z'`, SigV4's timestamp (ISO 8601 basic format, UTC).
const BASIC: &[FormatItem<'static>] =
    format_description!("[year][month][day]T[hour][minute][second]Z");
/// The HTTP `Date` header's IMF-fixdate, which SigV4 accepts when `X-Amz-Date` is absent.
const HTTP_DATE: &[FormatItem<'static>] = format_description!(
    "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
);
/// RFC 3986's unreserved characters stay; every other byte is `%XX` (upper-case hex).
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// The same for a path, whose `/` separators stay.
const ENCODE_PATH: &AsciiSet = &ENCODE.remove(b'/');

fn signature_does_not_match() -> SqsError {
    SqsError::new(
        ErrorKind::SignatureDoesNotMatch,
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
    )
}

fn incomplete(message: impl Into<String>) -> SqsError {
    SqsError::new(ErrorKind::IncompleteSignature, message)
}

/// `AKID/20150830/us-east-1/sqs/aws4_request`, split.
#[derive(Debug)]
struct Credential<'a> {
    access_key_id: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
}

impl<'a> Credential<'a> {
    fn parse(text: &'a str) -> Result<Self, SqsError> {
        // From the right: the scope has four parts, and whatever precedes them is the key id
        // (sluice token names could hold a `/`; AWS key ids never do).
        let mut parts = text.rsplitn(5, '/');
        let (Some(terminator), Some(service), Some(region), Some(date), Some(access_key_id)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(incomplete(format!(
                "Credential should be scoped to a valid region, service and date: '{text}'."
            )));
        };
        if terminator != "aws4_request" {
            return Err(incomplete(format!(
                "Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'."
            )));
        }
        let is_date = date.len() == 8 && date.bytes().all(|byte| byte.is_ascii_digit());
        if access_key_id.is_empty() || !is_date || region.is_empty() || service.is_empty() {
            return Err(incomplete(format!(
                "Credential should be scoped to a valid region, service and date: '{text}'."
            )));
        }
        Ok(Credential {
            access_key_id,
            date,
            region,
            service,
        })
    }

    fn scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date, self.region, self.service
        )
    }
}

/// The signature's parameters, from the `Authorization` header or from a presigned query.
#[derive(Debug)]
struct Authorization<'a> {
    credential: Credential<'a>,
    /// Lower-case and sorted, as the canonical request lists them.
    signed_headers: Vec<String>,
    signature: &'a str,
    /// In SigV4's basic format, as it enters the string to sign.
    timestamp: String,
    time: OffsetDateTime,
    /// A presigned URL's `X-Amz-Expires`; `None` for header auth.
    expires: Option<Duration>,
}

impl<'a> Authorization<'a> {
    fn find(request: &SignedRequest<'a>, query: &'a [QueryParam]) -> Result<Self, SqsError> {
        let header = request
            .headers
            .get(http::header::AUTHORIZATION)
            .map(|value| value.to_str().map(str::trim));
        let presigned = query.iter().any(|param| param.name == b"X-Amz-Algorithm");
        match (header, presigned) {
            (Some(_), true) => Err(incomplete(
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified.",
            )),
            (Some(Ok(header)), false) => Self::from_header(header, request.headers),
            (Some(Err(_)), false) => Err(incomplete(
                "Authorization header must be visible ASCII text.",
            )),
            (None, true) => Self::from_query(query),
            (None, false) => Err(SqsError::new(
                ErrorKind::MissingAuthenticationToken,
                "Request is missing Authentication Token",
            )),
        }
    }

    /// `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…` (the separators may
    /// carry spaces or not: SDKs differ).
    fn from_header(header: &'a str, headers: &HeaderMap) -> Result<Self, SqsError> {
        let (algorithm, fields) = header.split_once(' ').unwrap_or((header, ""));
        if algorithm != ALGORITHM {
            return Err(incomplete(format!(
                "Unsupported Authorization algorithm '{algorithm}': only {ALGORITHM} is accepted."
            )));
        }
        let (mut credential, mut signed_headers, mut signature) = (None, None, None);
        for field in fields
            .split(',')
            .map(str::trim)
            .filter(|field| !field.is_empty())
        {
            let Some((name, value)) = field.split_once('=') else {
                return Err(incomplete(format!(
                    "'{field}' not a valid key=value pair (missing equal-sign) in Authorization header: '{header}'."
                )));
            };
            match name.trim() {
                "Credential" => credential = Some(value.trim()),
                "SignedHeaders" => signed_headers = Some(value.trim()),
                "Signature" => signature = Some(value.trim()),
                _ => {}
            }
        }
        let nonempty = |value: Option<&'a str>| value.filter(|value| !value.is_empty());
        let (credential, signature, signed_headers) = (
            nonempty(credential),
            nonempty(signature),
            nonempty(signed_headers),
        );
        // AWS names every missing part at once, in this wording.
        let mut missing = String::new();
        for (part, value) in [
            ("Credential", credential),
            ("Signature", signature),
            ("SignedHeaders", signed_headers),
        ] {
            if value.is_none() {
                missing.push_str(&format!(
                    "Authorization header requires '{part}' parameter. "
                ));
            }
        }
        let time = match (
            header_str(headers, "x-amz-date"),
            header_str(headers, "date"),
        ) {
            (Some(date), _) => Some(parse_basic(date)?),
            (None, Some(http_date)) => Some(parse_http_date(http_date)?),
            (None, None) => {
                missing.push_str(
                    "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. ",
                );
                None
            }
        };
        let (Some(credential), Some(signature), Some(signed_headers), Some((timestamp, time))) =
            (credential, signature, signed_headers, time)
        else {
            return Err(incomplete(missing.trim_end().to_owned()));
        };
        Ok(Authorization {
            credential: Credential::parse(credential)?,
            signed_headers: parse_signed_headers(signed_headers)?,
            signature,
            timestamp,
            time,
            expires: None,
        })
    }

    /// `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
    /// `X-Amz-SignedHeaders`, `X-Amz-Signature` in the query string.
    fn from_query(query: &'a [QueryParam]) -> Result<Self, SqsError> {
        let param = |name: &str| {
            query
                .iter()
                .find(|param| param.name == name.as_bytes())
                .and_then(|param| std::str::from_utf8(&param.value).ok())
        };
        let mut missing = Vec::new();
        let mut require = |name: &'static str| {
            let value = param(name).filter(|value| !value.is_empty());
            if value.is_none() {
                missing.push(name);
            }
            value.unwrap_or_default()
        };
        let algorithm = require("X-Amz-Algorithm");
        let credential = require("X-Amz-Credential");
        let date = require("X-Amz-Date");
        let expires = require("X-Amz-Expires");
        let signed_headers = require("X-Amz-SignedHeaders");
        let signature = require("X-Amz-Signature");
        if !missing.is_empty() {
            return Err(incomplete(format!(
                "AWS query-string parameters must include {}.",
                missing.join(", ")
            )));
        }
        if algorithm != ALGORITHM {
            return Err(incomplete(format!(
                "X-Amz-Algorithm only supports '{ALGORITHM}', not '{algorithm}'."
            )));
        }
        let expires = expires
            .parse::<i64>()
            .ok()
            .filter(|seconds| (1..=PRESIGNED_EXPIRES_MAX_SECONDS).contains(seconds))
            .ok_or_else(|| {
                incomplete(format!(
                    "X-Amz-Expires must be a number of seconds from 1 to {PRESIGNED_EXPIRES_MAX_SECONDS}, not '{expires}'."
                ))
            })?;
        let (timestamp, time) = parse_basic(date)?;
        Ok(Authorization {
            credential: Credential::parse(credential)?,
            signed_headers: parse_signed_headers(signed_headers)?,
            signature,
            timestamp,
            time,
            expires: Some(Duration::seconds(expires)),
        })
    }
}

/// `host;x-amz-date`: lower-cased and sorted (SigV4 lists them so), `host` required.
fn parse_signed_headers(text: &str) -> Result<Vec<String>, SqsError> {
    let mut names: Vec<String> = text.split(';').map(str::to_ascii_lowercase).collect();
    if names.iter().any(String::is_empty) {
        return Err(incomplete(format!(
            "SignedHeaders must be header names separated by ';', not '{text}'."
        )));
    }
    if !names.iter().any(|name| name == "host") {
        return Err(incomplete(
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
        ));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

fn parse_basic(text: &str) -> Result<(String, OffsetDateTime), SqsError> {
    let malformed = || {
        incomplete(format!(
            "Date must be in ISO-8601 'basic format'. Got '{text}'."
        ))
    };
    // Exactly `YYYYMMDDTHHMMSSZ`: the scope's date is compared with its first 8 bytes.
    if text.len() != 16 {
        return Err(malformed());
    }
    let time = PrimitiveDateTime::parse(text, BASIC)
        .map_err(|_| malformed())?
        .assume_utc();
    Ok((text.to_owned(), time))
}

fn parse_http_date(text: &str) -> Result<(String, OffsetDateTime), SqsError> {
    let time = PrimitiveDateTime::parse(text, HTTP_DATE)
        .map_err(|_| incomplete(format!("Date must be an HTTP date in GMT. Got '{text}'.")))?
        .assume_utc();
    Ok((format_basic(time), time))
}

fn format_basic(time: OffsetDateTime) -> String {
    time.to_offset(UtcOffset::UTC)
        .format(BASIC)
        .unwrap_or_default()
}

/// Header auth: the request's date within 15 minutes of `now`, either way (AWS answers
/// `SignatureDoesNotMatch` with these messages — SQS's recorded answer, e.g. aws-sdk-php
/// issue 642 — rather than the `RequestExpired` of AWS's common-errors page; the Java SDK
/// corrects its clock on either). Presigned: not before its date (less the same skew), not
/// after its date plus `X-Amz-Expires` (`RequestExpired`, the common-errors page's code for
/// an expired presigned URL).
fn check_time(auth: &Authorization<'_>, now: OffsetDateTime) -> Result<(), SqsError> {
    if auth.time > now + CLOCK_SKEW_MAX {
        return Err(SqsError::new(
            ErrorKind::SignatureDoesNotMatch,
            format!(
                "Signature not yet current: {} is still later than {} ({} + 15 min.)",
                auth.timestamp,
                format_basic(now + CLOCK_SKEW_MAX),
                format_basic(now)
            ),
        ));
    }
    match auth.expires {
        None if auth.time < now - CLOCK_SKEW_MAX => Err(SqsError::new(
            ErrorKind::SignatureDoesNotMatch,
            format!(
                "Signature expired: {} is now earlier than {} ({} - 15 min.)",
                auth.timestamp,
                format_basic(now - CLOCK_SKEW_MAX),
                format_basic(now)
            ),
        )),
        Some(expires) if auth.time + expires < now => Err(SqsError::new(
            ErrorKind::RequestExpired,
            "Request has expired.",
        )),
        _ => Ok(()),
    }
}

/// The payload hash of the canonical request, and whether it covers the body: the declared
/// `x-amz-content-sha256` (checked against the body unless it is `UNSIGNED-PAYLOAD`), else the
/// body's own. Presigned URLs too: botocore's `SigV4QueryAuth`, aws-c-auth and the JS SDK hash
/// the body for every service but S3 (only S3's presigners write `UNSIGNED-PAYLOAD`).
fn payload_hash(request: &SignedRequest<'_>) -> Result<(String, bool), SqsError> {
    let body_hash = hex::encode(Sha256::digest(request.body));
    match header_str(request.headers, "x-amz-content-sha256") {
        None => Ok((body_hash, true)),
        // Both SQS protocols carry the operation and its members in the body (the query
        // protocol's `Action` too), so a signature that does not cover a body would let
        // anyone who saw one request send any other for the signature's 15 minutes.
        Some(UNSIGNED_PAYLOAD) if !request.body.is_empty() => Err(incomplete(format!(
            "x-amz-content-sha256: {UNSIGNED_PAYLOAD} is accepted only for a request without a body: the body of an SQS request carries its operation, so the signature must cover it."
        ))),
        Some(UNSIGNED_PAYLOAD) => Ok((UNSIGNED_PAYLOAD.to_owned(), false)),
        Some(declared) => {
            if !hex::decode(declared).is_ok_and(|digest| digest.len() == 32) {
                return Err(incomplete(format!(
                    "x-amz-content-sha256 must be the body's SHA-256 in hex or {UNSIGNED_PAYLOAD}, not '{declared}'."
                )));
            }
            if !declared.eq_ignore_ascii_case(&body_hash) {
                return Err(SqsError::new(
                    ErrorKind::SignatureDoesNotMatch,
                    "The provided 'x-amz-content-sha256' header does not match what was computed.",
                ));
            }
            Ok((declared.to_owned(), true))
        }
    }
}

/// Method, path, query, headers, signed-header list and payload hash, one per line.
fn canonical_request(
    request: &SignedRequest<'_>,
    query: &[QueryParam],
    auth: &Authorization<'_>,
    payload_hash: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b'\n');
    out.extend(
        percent_encode(normalize_path(request.path).as_bytes(), ENCODE_PATH).flat_map(str::bytes),
    );
    out.push(b'\n');
    let presigned = auth.expires.is_some();
    let mut params: Vec<(String, String)> = query
        .iter()
        .filter(|param| !(presigned && param.name == b"X-Amz-Signature"))
        .map(|param| {
            (
                percent_encode(&param.name, ENCODE).to_string(),
                percent_encode(&param.value, ENCODE).to_string(),
            )
        })
        .collect();
    params.sort();
    for (index, (name, value)) in params.iter().enumerate() {
        if index > 0 {
            out.push(b'&');
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
    }
    out.push(b'\n');
    for name in &auth.signed_headers {
        out.extend_from_slice(name.as_bytes());
        out.push(b':');
        for (index, value) in request.headers.get_all(name.as_str()).iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            // Trimmed, inner runs of whitespace as one space: botocore's `' '.join(v.split())`.
            for (word_index, word) in value
                .as_bytes()
                .split(u8::is_ascii_whitespace)
                .filter(|word| !word.is_empty())
                .enumerate()
            {
                if word_index > 0 {
                    out.push(b' ');
                }
                out.extend_from_slice(word);
            }
        }
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(auth.signed_headers.join(";").as_bytes());
    out.push(b'\n');
    out.extend_from_slice(payload_hash.as_bytes());
    out
}

/// RFC 3986 §5.2.4's dot-segment removal, plus dropping empty segments (`//`), as AWS
/// normalises paths for every service but S3 (botocore's `remove_dot_segments`). Works on
/// the encoded path: `%2E%2E` is a name, not `..`.
fn normalize_path(path: &str) -> Cow<'_, str> {
    if path.is_empty() {
        return Cow::Borrowed("/");
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            name => segments.push(name),
        }
    }
    let mut out = String::with_capacity(path.len());
    if path.starts_with('/') {
        out.push('/');
    }
    out.push_str(&segments.join("/"));
    if path.ends_with('/') && !segments.is_empty() {
        out.push('/');
    }
    if out == path {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(out)
    }
}

/// One query parameter, decoded to bytes (a client may send any octets).
#[derive(Debug)]
struct QueryParam {
    name: Vec<u8>,
    value: Vec<u8>,
}

/// `a=1&b=x+y` → `[(a, 1), (b, "x y")]`, decoded as `form_urlencoded` decodes it for the
/// request parser: `+` is a space, `%XX` a byte. Empty pieces (`a=1&&b=2`) are skipped.
fn parse_query(query: &str) -> Vec<QueryParam> {
    let decode = |text: &str| -> Vec<u8> {
        let spaced = text.replace('+', " ");
        percent_decode(spaced.as_bytes()).collect()
    };
    query
        .split('&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| {
            let (name, value) = piece.split_once('=').unwrap_or((piece, ""));
            QueryParam {
                name: decode(name),
                value: decode(value),
            }
        })
        .collect()
}

/// HMAC chain of SigV4: `AWS4<secret>` → date → region → service → `aws4_request`.
fn signing_key(secret: &str, credential: &Credential<'_>) -> Vec<u8> {
    let mut key = format!("AWS4{secret}").into_bytes();
    for part in [
        credential.date,
        credential.region,
        credential.service,
        "aws4_request",
    ] {
        let mut mac = hmac(&key);
        mac.update(part.as_bytes());
        key = mac.finalize().into_bytes().to_vec();
    }
    key
}

fn hmac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length (longer ones are hashed first), so this cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length")
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
}

#[cfg(test)]
mod tests;
