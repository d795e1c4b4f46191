//! MVCC revisions (etcd `mvcc/revision.go`).
//!
//! A revision is `{main, sub}`: `main` is the store-wide revision a modifying
//! request takes (one per request, a whole Txn included), `sub` orders the
//! changes inside that request. On disk a revision is 16 bytes, both halves
//! big-endian, so byte order is revision order.

use crate::error::{Error, Result};

/// A point in the store's history: `main` is the revision clients see,
/// `sub` the index of a change within one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision {
    /// The store-wide revision of the request (etcd `header.revision`).
    pub main: i64,
    /// The change's position within its request, from 0.
    pub sub: i64,
}

/// Encoded length of a [`Revision`] in bytes.
pub const REVISION_BYTES: usize = 16;

impl Revision {
    /// A revision `{main, sub}`.
    pub const fn new(main: i64, sub: i64) -> Self {
        Revision { main, sub }
    }

    /// Big-endian encoding: 8 bytes of `main`, then 8 of `sub`.
    pub fn to_bytes(self) -> [u8; REVISION_BYTES] {
        let mut b = [0u8; REVISION_BYTES];
        b[..8].copy_from_slice(&self.main.to_be_bytes());
        b[8..].copy_from_slice(&self.sub.to_be_bytes());
        b
    }

    /// Decodes the first 16 bytes of `b`.
    ///
    /// # Errors
    /// [`Error::Internal`] if `b` is shorter than 16 bytes (corrupt data).
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        if b.len() < REVISION_BYTES {
            return Err(Error::internal(format!("corrupt revision key of {} bytes", b.len())));
        }
        let mut main = [0u8; 8];
        let mut sub = [0u8; 8];
        main.copy_from_slice(&b[..8]);
        sub.copy_from_slice(&b[8..16]);
        Ok(Revision { main: i64::from_be_bytes(main), sub: i64::from_be_bytes(sub) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_is_revision_order() {
        let revs = [Revision::new(1, 0), Revision::new(1, 1), Revision::new(2, 0), Revision::new(256, 3)];
        for w in revs.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[0].to_bytes() < w[1].to_bytes());
        }
        for r in revs {
            assert_eq!(Revision::from_bytes(&r.to_bytes()).ok(), Some(r));
        }
        assert!(Revision::from_bytes(&[1, 2, 3]).is_err());
    }
}
