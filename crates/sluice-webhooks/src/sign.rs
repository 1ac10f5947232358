//! Signing: the [Standard Webhooks](https://www.standardwebhooks.com/) signature sluice puts on its
//! own push deliveries, and the one HMAC helper every scheme in [`crate::verify`] is computed with.
//!
//! A Standard Webhooks delivery carries three headers:
//!
//! - `webhook-id`: the message id, stable across retries of the same message;
//! - `webhook-timestamp`: Unix seconds when this attempt was signed;
//! - `webhook-signature`: `v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
//!
//! The key is the secret `whsec_<base64>` with the prefix stripped and the rest base64-decoded
//! (see [`decode_standard_secret`]).

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, KeyInit, Mac};

use crate::verify::HmacAlgorithm;

/// Name of the Standard Webhooks message id header.
pub const HEADER_ID: &str = "webhook-id";
/// Name of the Standard Webhooks timestamp header (Unix seconds).
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// Name of the Standard Webhooks signature header (space-separated `v1,<base64>` entries).
pub const HEADER_SIGNATURE: &str = "webhook-signature";
/// Svix's name for [`HEADER_ID`]: Svix sends `svix-*` headers (the `webhook-*` names only on its
/// white-label plans), signed the same way.
pub const SVIX_HEADER_ID: &str = "svix-id";
/// Svix's name for [`HEADER_TIMESTAMP`].
pub const SVIX_HEADER_TIMESTAMP: &str = "svix-timestamp";
/// Svix's name for [`HEADER_SIGNATURE`].
pub const SVIX_HEADER_SIGNATURE: &str = "svix-signature";

/// The prefix of a Standard Webhooks symmetric secret.
const SECRET_PREFIX: &str = "whsec_";

/// Standard base64 alphabet (never URL-safe) that encodes with padding and decodes with or
/// without it. Used for secrets and for signatures received in headers.
pub(crate) const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// HMAC of the concatenation of `parts` under `key` with `algorithm`.
///
/// The single MAC routine of the crate: every scheme, inbound or outbound, goes through it. Public
/// so a consumer (and the tests) can check a stored body against a kept signature header.
pub fn hmac(algorithm: HmacAlgorithm, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        // HMAC accepts keys of any length (long keys are hashed), so this cannot fail.
        let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }
    match algorithm {
        HmacAlgorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key, parts),
        HmacAlgorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key, parts),
        HmacAlgorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key, parts),
    }
}

/// Decodes a Standard Webhooks secret into the HMAC key bytes.
///
/// Accepts `whsec_<base64>` or the bare base64 (standard alphabet, padding optional). The
/// asymmetric key forms `whsk_`/`whpk_` (ed25519) are refused, as is anything that does not decode
/// or decodes to nothing. Error messages never contain the secret.
pub fn decode_standard_secret(secret: &str) -> Result<Vec<u8>, String> {
    let secret = secret.trim();
    if secret.starts_with("whsk_") || secret.starts_with("whpk_") {
        return Err(
            "asymmetric (ed25519, whsk_/whpk_) Standard Webhooks keys are not supported; \
             use a symmetric whsec_ secret"
                .to_string(),
        );
    }
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let key = B64.decode(encoded).map_err(|_| {
        "Standard Webhooks secret is not valid base64 (expected whsec_<base64>)".to_string()
    })?;
    if key.is_empty() {
        return Err("Standard Webhooks secret is empty".to_string());
    }
    Ok(key)
}

/// Signs messages the Standard Webhooks way (`v1`, HMAC-SHA256, base64).
///
/// `Debug` prints no key material.
#[derive(Clone)]
pub struct StandardSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for StandardSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandardSigner")
            .field("key", &"<redacted>")
            .finish()
    }
}

impl StandardSigner {
    /// A signer for `secret` (`whsec_<base64>` or bare base64, see [`decode_standard_secret`]).
    pub fn new(secret: &str) -> Result<Self, String> {
        Ok(Self {
            key: decode_standard_secret(secret)?,
        })
    }

    /// The raw HMAC-SHA256 of `<msg_id>.<timestamp_s>.<body>`.
    pub(crate) fn mac(&self, msg_id: &str, timestamp_s: i64, body: &[u8]) -> Vec<u8> {
        let timestamp = timestamp_s.to_string();
        hmac(
            HmacAlgorithm::Sha256,
            &self.key,
            &[msg_id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
        )
    }

    /// The `webhook-signature` value for this message: `v1,<base64>`.
    pub fn sign(&self, msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
        format!("v1,{}", B64.encode(self.mac(msg_id, timestamp_s, body)))
    }

    /// The three headers of a signed delivery, in the order `webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`.
    pub fn headers(
        &self,
        msg_id: &str,
        timestamp_s: i64,
        body: &[u8],
    ) -> [(&'static str, String); 3] {
        [
            (HEADER_ID, msg_id.to_string()),
            (HEADER_TIMESTAMP, timestamp_s.to_string()),
            (HEADER_SIGNATURE, self.sign(msg_id, timestamp_s, body)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Golden vector from ecosystem.md §3 (Python `standardwebhooks` agrees).
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn golden_vector() {
        let signer = StandardSigner::new(SECRET).unwrap();
        assert_eq!(signer.sign(MSG_ID, TS, BODY), SIG);
    }

    #[test]
    fn bare_base64_secret_is_the_same_key() {
        let bare = SECRET.strip_prefix("whsec_").unwrap();
        assert_eq!(
            decode_standard_secret(bare).unwrap(),
            decode_standard_secret(SECRET).unwrap()
        );
        assert_eq!(decode_standard_secret(SECRET).unwrap().len(), 24);
        assert_eq!(
            StandardSigner::new(bare).unwrap().sign(MSG_ID, TS, BODY),
            SIG
        );
    }

    #[test]
    fn unpadded_secret_decodes() {
        // 25 bytes of key: base64 needs padding, accept it without.
        let padded = B64.encode([7u8; 25]);
        assert!(padded.ends_with('='));
        let unpadded = padded.trim_end_matches('=');
        assert_eq!(
            decode_standard_secret(&format!("whsec_{unpadded}")).unwrap(),
            vec![7u8; 25]
        );
    }

    #[test]
    fn headers_are_complete() {
        let signer = StandardSigner::new(SECRET).unwrap();
        let headers = signer.headers(MSG_ID, TS, BODY);
        assert_eq!(headers[0], ("webhook-id", MSG_ID.to_string()));
        assert_eq!(headers[1], ("webhook-timestamp", TS.to_string()));
        assert_eq!(headers[2], ("webhook-signature", SIG.to_string()));
    }

    #[test]
    fn signature_binds_id_timestamp_and_body() {
        let signer = StandardSigner::new(SECRET).unwrap();
        assert_ne!(signer.sign("msg_other", TS, BODY), SIG);
        assert_ne!(signer.sign(MSG_ID, TS + 1, BODY), SIG);
        assert_ne!(signer.sign(MSG_ID, TS, b"{\"test\": 2432232315}"), SIG);
    }

    #[test]
    fn invalid_secrets_are_refused_without_echoing_them() {
        for bad in ["whsec_not*base64!", "whsec_", "", "whsk_AAAA", "whpk_AAAA"] {
            let err = decode_standard_secret(bad).unwrap_err();
            if bad.len() > 6 {
                assert!(!err.contains(bad), "{err}");
            }
            assert!(StandardSigner::new(bad).is_err());
        }
    }

    #[test]
    fn debug_redacts_key() {
        let signer = StandardSigner::new(SECRET).unwrap();
        let debug = format!("{signer:?}");
        assert!(debug.contains("redacted"));
        assert!(!debug.chars().any(|c| c.is_ascii_digit()), "{debug}");
    }

    #[test]
    fn hmac_helper_known_answers() {
        // RFC 2202 / RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let parts: [&[u8]; 2] = [b"what do ya want ", b"for nothing?"];
        assert_eq!(
            hex::encode(hmac(HmacAlgorithm::Sha1, b"Jefe", &parts)),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
        assert_eq!(
            hex::encode(hmac(HmacAlgorithm::Sha256, b"Jefe", &parts)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex::encode(hmac(HmacAlgorithm::Sha512, b"Jefe", &parts)),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
    }
}
