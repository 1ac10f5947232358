//! Receipt handles: a sluice receipt (message id, lease number, random token) and its queue,
//! base64url-encoded. The lease number and token make each receive's handle different and
//! fence old ones: a handle from an earlier receive acks nothing once the message has been
//! received again (docs/sqs.md "Receipt handles").

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sluice_core::message::Receipt;
use sluice_sqs::{ErrorKind, SqsError};

/// The handle of `receipt` in `queue`.
pub fn encode(queue: &str, receipt: &Receipt) -> String {
    URL_SAFE_NO_PAD.encode(format!("{queue}\n{receipt}"))
}

/// The receipt text a handle holds, when the handle is this queue's; otherwise
/// `ReceiptHandleIsInvalid` with AWS's wording.
pub fn decode(queue: &str, handle: &str) -> Result<String, SqsError> {
    let invalid = || {
        let shown: String = handle.chars().take(200).collect();
        SqsError::new(
            ErrorKind::ReceiptHandleIsInvalid,
            format!("The input receipt handle \"{shown}\" is not a valid receipt handle."),
        )
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(handle.trim_end_matches('='))
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (of_queue, receipt) = text.split_once('\n').ok_or_else(invalid)?;
    if of_queue != queue || Receipt::parse(receipt).is_none() {
        return Err(invalid());
    }
    Ok(receipt.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_within_their_queue_only() {
        let receipt = Receipt {
            message_id: uuid::Uuid::nil(),
            lease_number: 3,
            token: 0xabc,
        };
        let handle = encode("jobs", &receipt);
        assert_eq!(decode("jobs", &handle).unwrap(), receipt.to_string());
        assert_eq!(
            decode("other", &handle).unwrap_err().kind,
            ErrorKind::ReceiptHandleIsInvalid
        );
        for garbage in [
            "garbage",
            "",
            "!!!",
            &URL_SAFE_NO_PAD.encode("jobs\nnot-a-receipt"),
        ] {
            assert_eq!(
                decode("jobs", garbage).unwrap_err().kind,
                ErrorKind::ReceiptHandleIsInvalid
            );
        }
    }
}
