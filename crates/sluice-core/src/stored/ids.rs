//! Message ids that carry their `seq`.
//!
//! An id is a valid UUIDv7: 48 bits of Unix milliseconds, then, where v7 puts random bits, the
//! message's `seq` (62 bits of `rand_b`; `rand_a` holds the bits above them, zero in practice).
//! Ids sort by time and then by enqueue order, and a lookup by id needs no index of its own: the
//! store decodes the seq, reads that row by primary key, and checks the stored id matches. The
//! receipt's random token, not the id, is what makes a lease hard to forge.

use crate::Millis;
use crate::message::Seq;
use uuid::Uuid;

const RAND_B_BITS: u32 = 62;

/// The id of the message with `seq`, enqueued at `now_ms`.
pub fn encode(seq: Seq, now_ms: Millis) -> Uuid {
    let ms = (now_ms.max(0) as u64) & 0xFFFF_FFFF_FFFF;
    let rand_a = (seq >> RAND_B_BITS) & 0x0FFF;
    let rand_b = seq & ((1 << RAND_B_BITS) - 1);
    let mut bytes = [0u8; 16];
    bytes[0..6].copy_from_slice(&ms.to_be_bytes()[2..8]);
    bytes[6] = 0x70 | ((rand_a >> 8) as u8 & 0x0F);
    bytes[7] = rand_a as u8;
    bytes[8] = 0x80 | ((rand_b >> 56) as u8 & 0x3F);
    bytes[9..16].copy_from_slice(&rand_b.to_be_bytes()[1..8]);
    Uuid::from_bytes(bytes)
}

/// The seq an id was made from; `None` for ids this store did not make.
pub fn decode(id: &Uuid) -> Option<Seq> {
    let bytes = id.as_bytes();
    if bytes[6] >> 4 != 7 || bytes[8] >> 6 != 0b10 {
        return None;
    }
    let rand_a = (u64::from(bytes[6] & 0x0F) << 8) | u64::from(bytes[7]);
    let mut low = [0u8; 8];
    low[1..8].copy_from_slice(&bytes[9..16]);
    let rand_b = (u64::from(bytes[8] & 0x3F) << 56) | u64::from_be_bytes(low);
    Some((rand_a << RAND_B_BITS) | rand_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_v7_uuids_that_round_trip_their_seq_and_sort_by_time_then_seq() {
        for seq in [1, 2, 255, 1 << 40, (1 << 62) - 1, 1 << 62, (1 << 63) - 1] {
            let id = encode(seq, 1_795_000_000_123);
            assert_eq!(id.get_version_num(), 7);
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(decode(&id), Some(seq), "{id}");
        }
        let a = encode(5, 1_000);
        let b = encode(6, 1_000);
        let c = encode(1, 1_001);
        assert!(a < b && b < c);
        assert_eq!(decode(&Uuid::nil()), None);
        assert_eq!(decode(&Uuid::max()), None);
    }
}
