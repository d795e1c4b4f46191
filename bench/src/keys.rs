//! Key names, values and the send timestamp embedded in watch values.
//!
//! Key `i` of a key space with prefix `/bench/put/` and key size 32 is the
//! prefix followed by `i` in decimal, zero-padded to fill 32 bytes:
//! `/bench/put/000000000000000000042`. When the prefix plus the digits are
//! longer than the key size, the key is simply longer.
//!
//! A watch-fanout value starts with [`TS_LEN`] ASCII digits: nanoseconds
//! since the run's shared [`Instant`] at the moment the put was sent. The
//! rest is padding up to the value size.

use std::time::Instant;

use rand::Rng;

/// Length of the decimal timestamp at the start of a watch value, in bytes.
pub const TS_LEN: usize = 20;

/// A space of `count` distinct keys under one prefix.
#[derive(Debug, Clone)]
pub struct KeySpace {
    prefix: String,
    key_size: usize,
    count: u64,
}

impl KeySpace {
    /// A key space of `count` keys (at least 1) under `prefix`, each
    /// `key_size` bytes long where the prefix leaves room.
    pub fn new(prefix: impl Into<String>, key_size: usize, count: u64) -> Self {
        Self { prefix: prefix.into(), key_size, count: count.max(1) }
    }

    /// Number of distinct keys.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Always false: a key space holds at least one key.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The common prefix of every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Key number `i` (taken modulo the key space size).
    pub fn key(&self, i: u64) -> Vec<u8> {
        let i = i % self.count;
        let width = self.key_size.saturating_sub(self.prefix.len());
        format!("{}{:0width$}", self.prefix, i).into_bytes()
    }

    /// A key chosen uniformly at random.
    pub fn random(&self, rng: &mut impl Rng) -> Vec<u8> {
        self.key(rng.random_range(0..self.count))
    }
}

/// `size` random printable ASCII bytes.
pub fn random_value(size: usize, rng: &mut impl Rng) -> Vec<u8> {
    (0..size).map(|_| rng.random_range(b'a'..=b'z')).collect()
}

/// Nanoseconds from `epoch` to now, saturating at `u64::MAX` (584 years).
pub fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A watch value: the send time in nanoseconds since the run's epoch as
/// [`TS_LEN`] decimal digits, padded with `.` to `size` bytes (never shorter
/// than [`TS_LEN`]).
pub fn encode_ts_value(nanos: u64, size: usize) -> Vec<u8> {
    let mut v = format!("{nanos:0TS_LEN$}").into_bytes();
    v.resize(size.max(TS_LEN), b'.');
    v
}

/// Reads the send timestamp back from a watch value; `None` when the value
/// did not come from [`encode_ts_value`].
pub fn decode_ts_value(value: &[u8]) -> Option<u64> {
    let digits = value.get(..TS_LEN)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::SmallRng, SeedableRng};

    #[test]
    fn keys_are_padded_to_key_size() {
        let ks = KeySpace::new("/bench/put/", 32, 100);
        let k = ks.key(42);
        assert_eq!(k.len(), 32);
        assert_eq!(k, b"/bench/put/000000000000000000042");
        assert_eq!(ks.key(142), k, "index wraps around the key space");
    }

    #[test]
    fn short_key_size_keeps_prefix_and_digits() {
        let ks = KeySpace::new("/a/", 2, 1000);
        assert_eq!(ks.key(7), b"/a/7");
    }

    #[test]
    fn random_keys_stay_in_the_space() {
        let ks = KeySpace::new("/p/", 8, 3);
        let mut rng = SmallRng::seed_from_u64(1);
        let all: Vec<_> = (0..3).map(|i| ks.key(i)).collect();
        for _ in 0..100 {
            assert!(all.contains(&ks.random(&mut rng)));
        }
    }

    #[test]
    fn timestamp_round_trips() {
        for (nanos, size) in [(0, 0), (1, 20), (123_456_789, 256), (u64::MAX, 30)] {
            let v = encode_ts_value(nanos, size);
            assert_eq!(v.len(), size.max(TS_LEN));
            assert_eq!(decode_ts_value(&v), Some(nanos));
        }
    }

    #[test]
    fn foreign_values_do_not_decode() {
        for v in [&b""[..], b"12345", b"abcdefghijklmnopqrstuvwxyz", b"-0000000000000000001"] {
            assert_eq!(decode_ts_value(v), None, "{v:?}");
        }
    }
}
