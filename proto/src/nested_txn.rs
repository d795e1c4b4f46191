//! Decoding etcd's nested txns with a depth budget.
//!
//! A `TxnRequest` holds `RequestOp`s, which may hold a `TxnRequest`, and a
//! `TxnResponse` nests the same way through `ResponseOp`. prost decodes
//! them recursively and refuses more than 100 nested messages (its
//! recursion limit): two per txn level, so about 50 levels. etcd has no
//! depth limit of its own; its limit is the op budget (`--max-txn-ops`,
//! 128 by default) spent along each path of nested txns, which a chain of
//! single-op txns 128 deep passes (129 with an empty innermost txn).
//!
//! [`decode_request`] and [`decode_response`] read these messages field by
//! field with prost's wire helpers, recursing once per txn level, and
//! refuse a txn nested deeper than the caller's `max_depth` with
//! [`DecodeError::TooDeep`] before reading further: the stack they use,
//! and the stack of the caller's own recursive code over the decoded txn,
//! stays bounded whatever the input. The other messages (`Compare`,
//! `RangeRequest`, `PutResponse`, ...) do not nest; prost decodes them.
//!
//! Depth counts txn levels: a txn with no nested txn is 1 deep, and
//!
//! ```text
//! TxnRequest { success: [RequestOp { request_txn: TxnRequest { success: [put] } }] }
//! ```
//!
//! is 2 deep. Otherwise the result is what prost decodes (etcd's field
//! numbers, from rpc.proto): unknown fields are skipped, a repeated field
//! is appended to, a message field that appears twice is merged, and of a
//! oneof the last field wins (merged into the earlier one if it is the
//! same field).

use prost::encoding::{check_wire_type, decode_key, decode_varint, skip_field, DecodeContext, WireType};
use prost::Message;

use crate::etcdserverpb::{
    Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest, RangeResponse, RequestOp, RequestOpRequest, ResponseOp, ResponseOpResponse, TxnRequest, TxnResponse,
};

/// Why a nested txn did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A txn is nested deeper than `max_depth` levels; the rest of the
    /// input was not read.
    #[error("txn nested deeper than {max_depth} levels")]
    TooDeep {
        /// The caller's budget.
        max_depth: usize,
    },
    /// A length-delimited field claims more bytes than its message holds.
    #[error("failed to decode Protobuf message: a field's length runs past the end of its message")]
    Truncated,
    /// Malformed protobuf, as prost reports it.
    #[error(transparent)]
    Protobuf(#[from] prost::DecodeError),
}

/// Decodes a `TxnRequest` (etcd `KV.Txn`'s request) nested at most
/// `max_depth` levels deep.
///
/// # Errors
/// [`DecodeError::TooDeep`] for a deeper txn (also when `max_depth` is 0);
/// the other variants for malformed protobuf.
pub fn decode_request(buf: &[u8], max_depth: usize) -> Result<TxnRequest, DecodeError> {
    let mut txn = TxnRequest::default();
    merge_request(&mut txn, buf, Depth { level: 1, max: max_depth })?;
    Ok(txn)
}

/// Decodes a `TxnResponse` nested at most `max_depth` levels deep.
///
/// # Errors
/// As [`decode_request`].
pub fn decode_response(buf: &[u8], max_depth: usize) -> Result<TxnResponse, DecodeError> {
    let mut txn = TxnResponse::default();
    merge_response(&mut txn, buf, Depth { level: 1, max: max_depth })?;
    Ok(txn)
}

/// The txn level being decoded (1 for the outermost) and the most allowed.
#[derive(Clone, Copy)]
struct Depth {
    level: usize,
    max: usize,
}

impl Depth {
    fn check(self) -> Result<(), DecodeError> {
        if self.level > self.max {
            return Err(DecodeError::TooDeep { max_depth: self.max });
        }
        Ok(())
    }

    fn nested(self) -> Depth {
        Depth { level: self.level + 1, ..self }
    }
}

/// The body of the length-delimited field whose key was just read from
/// `buf`; `buf` moves past it.
fn body<'a>(buf: &mut &'a [u8], wire_type: WireType) -> Result<&'a [u8], DecodeError> {
    check_wire_type(WireType::LengthDelimited, wire_type)?;
    let len = decode_varint(buf)?;
    let len = usize::try_from(len).ok().filter(|&n| n <= buf.len()).ok_or(DecodeError::Truncated)?;
    let (field, rest) = buf.split_at(len);
    *buf = rest;
    Ok(field)
}

/// Skips a field this decoder does not know, as prost does.
fn skip(buf: &mut &[u8], tag: u32, wire_type: WireType) -> Result<(), DecodeError> {
    Ok(skip_field(wire_type, tag, buf, DecodeContext::default())?)
}

/// Sets a oneof to the non-nesting message in `body`, or merges it into
/// the one already there if it is the same field (as prost does).
macro_rules! merge_leaf {
    ($slot:expr, $variant:path, $ty:ty, $body:expr) => {
        if let Some($variant(m)) = $slot {
            m.merge($body)?;
        } else {
            *$slot = Some($variant(<$ty>::decode($body)?));
        }
    };
}

// The recursive functions below keep their stack frames small (prost's
// decoders, inlined into them, made each txn level's frames several times
// larger): an op is decoded in place in its vector, and a leaf message by
// a function of its own.

fn merge_request(txn: &mut TxnRequest, mut buf: &[u8], depth: Depth) -> Result<(), DecodeError> {
    depth.check()?;
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf)?;
        let ops = match tag {
            1 => {
                merge_compare(&mut txn.compare, body(&mut buf, wire_type)?)?;
                continue;
            }
            2 => &mut txn.success,
            3 => &mut txn.failure,
            _ => {
                skip(&mut buf, tag, wire_type)?;
                continue;
            }
        };
        let field = body(&mut buf, wire_type)?;
        ops.push(RequestOp::default());
        if let Some(op) = ops.last_mut() {
            merge_request_op(&mut op.request, field, depth)?;
        }
    }
    Ok(())
}

#[inline(never)]
fn merge_compare(compare: &mut Vec<Compare>, body: &[u8]) -> Result<(), DecodeError> {
    compare.push(Compare::decode(body)?);
    Ok(())
}

fn merge_request_op(slot: &mut Option<RequestOpRequest>, mut buf: &[u8], depth: Depth) -> Result<(), DecodeError> {
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf)?;
        match tag {
            1..=3 => merge_request_leaf(slot, tag, body(&mut buf, wire_type)?)?,
            4 => {
                let field = body(&mut buf, wire_type)?;
                if !matches!(slot, Some(RequestOpRequest::RequestTxn(_))) {
                    *slot = Some(RequestOpRequest::RequestTxn(TxnRequest::default()));
                }
                if let Some(RequestOpRequest::RequestTxn(t)) = slot {
                    merge_request(t, field, depth.nested())?;
                }
            }
            _ => skip(&mut buf, tag, wire_type)?,
        }
    }
    Ok(())
}

#[inline(never)]
fn merge_request_leaf(slot: &mut Option<RequestOpRequest>, tag: u32, body: &[u8]) -> Result<(), DecodeError> {
    match tag {
        1 => merge_leaf!(slot, RequestOpRequest::RequestRange, RangeRequest, body),
        2 => merge_leaf!(slot, RequestOpRequest::RequestPut, PutRequest, body),
        _ => merge_leaf!(slot, RequestOpRequest::RequestDeleteRange, DeleteRangeRequest, body),
    }
    Ok(())
}

fn merge_response(txn: &mut TxnResponse, mut buf: &[u8], depth: Depth) -> Result<(), DecodeError> {
    depth.check()?;
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf)?;
        match tag {
            1 | 2 => merge_response_scalars(txn, tag, wire_type, &mut buf)?,
            3 => {
                let field = body(&mut buf, wire_type)?;
                txn.responses.push(ResponseOp::default());
                if let Some(op) = txn.responses.last_mut() {
                    merge_response_op(&mut op.response, field, depth)?;
                }
            }
            _ => skip(&mut buf, tag, wire_type)?,
        }
    }
    Ok(())
}

/// `header` (1) and `succeeded` (2) of a TxnResponse.
#[inline(never)]
fn merge_response_scalars(txn: &mut TxnResponse, tag: u32, wire_type: WireType, buf: &mut &[u8]) -> Result<(), DecodeError> {
    if tag == 1 {
        txn.header.get_or_insert_with(Default::default).merge(body(buf, wire_type)?)?;
    } else {
        prost::encoding::bool::merge(wire_type, &mut txn.succeeded, buf, DecodeContext::default())?;
    }
    Ok(())
}

fn merge_response_op(slot: &mut Option<ResponseOpResponse>, mut buf: &[u8], depth: Depth) -> Result<(), DecodeError> {
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf)?;
        match tag {
            1..=3 => merge_response_leaf(slot, tag, body(&mut buf, wire_type)?)?,
            4 => {
                let field = body(&mut buf, wire_type)?;
                if !matches!(slot, Some(ResponseOpResponse::ResponseTxn(_))) {
                    *slot = Some(ResponseOpResponse::ResponseTxn(TxnResponse::default()));
                }
                if let Some(ResponseOpResponse::ResponseTxn(t)) = slot {
                    merge_response(t, field, depth.nested())?;
                }
            }
            _ => skip(&mut buf, tag, wire_type)?,
        }
    }
    Ok(())
}

#[inline(never)]
fn merge_response_leaf(slot: &mut Option<ResponseOpResponse>, tag: u32, body: &[u8]) -> Result<(), DecodeError> {
    match tag {
        1 => merge_leaf!(slot, ResponseOpResponse::ResponseRange, RangeResponse, body),
        2 => merge_leaf!(slot, ResponseOpResponse::ResponsePut, PutResponse, body),
        _ => merge_leaf!(slot, ResponseOpResponse::ResponseDeleteRange, DeleteRangeResponse, body),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use prost::encoding::{encode_key, encode_varint};

    use super::*;
    use crate::etcdserverpb::{ResponseHeader, TargetUnion};
    use crate::mvccpb::KeyValue;

    /// xorshift64: the same "random" messages on every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
        fn bytes(&mut self) -> Vec<u8> {
            (0..self.below(4)).map(|_| b'a' + self.below(3) as u8).collect()
        }
        fn int(&mut self) -> i64 {
            [0, 1, -1, 300, i64::MAX][self.below(5) as usize]
        }
    }

    fn field(tag: u32, body: &[u8], out: &mut Vec<u8>) {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }

    /// A field this decoder does not know, of any wire type (tags above 4
    /// are unknown in all four messages).
    fn unknown(rng: &mut Rng, out: &mut Vec<u8>) {
        let tag = [5, 9, 16, 2047, (1 << 29) - 1][rng.below(5) as usize];
        match rng.below(5) {
            0 => {
                encode_key(tag, WireType::Varint, out);
                encode_varint(rng.below(1 << 40), out);
            }
            1 => {
                encode_key(tag, WireType::SixtyFourBit, out);
                out.extend_from_slice(&[7; 8]);
            }
            2 => {
                encode_key(tag, WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&[7; 4]);
            }
            3 => field(tag, &rng.bytes(), out),
            _ => {
                encode_key(tag, WireType::StartGroup, out);
                encode_key(1, WireType::Varint, out);
                encode_varint(3, out);
                encode_key(tag, WireType::EndGroup, out);
            }
        }
    }

    fn kv(rng: &mut Rng) -> KeyValue {
        KeyValue { key: rng.bytes(), create_revision: rng.int(), mod_revision: rng.int(), version: rng.int(), value: rng.bytes(), lease: rng.int() }
    }

    fn header(rng: &mut Rng) -> ResponseHeader {
        ResponseHeader { cluster_id: rng.below(9), member_id: rng.below(9), revision: rng.int(), raft_term: rng.below(9) }
    }

    /// The bytes of a TxnRequest at most `depth` levels deep, with what a
    /// sender other than prost may write: unknown fields anywhere, and a
    /// RequestOp split into several encodings of its oneof (which a decoder
    /// must merge or replace as prost does).
    fn request_bytes(rng: &mut Rng, depth: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rng.below(5) {
            match rng.below(6) {
                0 => {
                    let target_union = [None, Some(TargetUnion::Version(3)), Some(TargetUnion::Value(rng.bytes()))][rng.below(3) as usize].clone();
                    let c = Compare { result: rng.below(4) as i32, target: rng.below(5) as i32, key: rng.bytes(), target_union, range_end: rng.bytes() };
                    field(1, &c.encode_to_vec(), &mut out);
                }
                1 => unknown(rng, &mut out),
                n => field(if n % 2 == 0 { 2 } else { 3 }, &request_op_bytes(rng, depth), &mut out),
            }
        }
        out
    }

    fn request_op_bytes(rng: &mut Rng, depth: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rng.below(4) {
            match rng.below(if depth > 1 { 6 } else { 4 }) {
                0 => field(1, &RangeRequest { key: rng.bytes(), limit: rng.int(), serializable: rng.below(2) == 1, ..Default::default() }.encode_to_vec(), &mut out),
                1 => field(2, &PutRequest { key: rng.bytes(), value: rng.bytes(), lease: rng.int(), ..Default::default() }.encode_to_vec(), &mut out),
                2 => field(3, &DeleteRangeRequest { key: rng.bytes(), range_end: rng.bytes(), prev_kv: rng.below(2) == 1 }.encode_to_vec(), &mut out),
                3 => unknown(rng, &mut out),
                _ => field(4, &request_bytes(rng, depth - 1), &mut out),
            }
        }
        out
    }

    /// As [`request_bytes`], for a TxnResponse.
    fn response_bytes(rng: &mut Rng, depth: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rng.below(5) {
            match rng.below(6) {
                0 => field(1, &header(rng).encode_to_vec(), &mut out),
                1 => {
                    encode_key(2, WireType::Varint, &mut out);
                    encode_varint(rng.below(3), &mut out);
                }
                2 => unknown(rng, &mut out),
                _ => field(3, &response_op_bytes(rng, depth), &mut out),
            }
        }
        out
    }

    fn response_op_bytes(rng: &mut Rng, depth: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rng.below(4) {
            match rng.below(if depth > 1 { 6 } else { 4 }) {
                0 => field(1, &RangeResponse { header: Some(header(rng)), kvs: vec![kv(rng), kv(rng)], more: true, count: rng.int() }.encode_to_vec(), &mut out),
                1 => field(2, &PutResponse { header: None, prev_kv: Some(kv(rng)) }.encode_to_vec(), &mut out),
                2 => field(3, &DeleteRangeResponse { header: Some(header(rng)), deleted: rng.int(), prev_kvs: vec![kv(rng)] }.encode_to_vec(), &mut out),
                3 => unknown(rng, &mut out),
                _ => field(4, &response_bytes(rng, depth - 1), &mut out),
            }
        }
        out
    }

    #[test]
    fn shallow_txns_decode_as_prost_decodes_them() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let bytes = request_bytes(&mut rng, 4);
            let want = TxnRequest::decode(&bytes[..]).expect("prost decodes what the generator writes");
            assert_eq!(decode_request(&bytes, 4).as_ref(), Ok(&want), "{bytes:?}");
            // And prost's own encoding of it round-trips.
            assert_eq!(decode_request(&want.encode_to_vec(), 4), Ok(want));

            let bytes = response_bytes(&mut rng, 4);
            let want = TxnResponse::decode(&bytes[..]).expect("prost decodes what the generator writes");
            assert_eq!(decode_response(&bytes, 4).as_ref(), Ok(&want), "{bytes:?}");
            assert_eq!(decode_response(&want.encode_to_vec(), 4), Ok(want));
        }
    }

    #[test]
    fn unknown_fields_are_skipped_at_every_level() {
        let inner = TxnRequest { compare: vec![], success: vec![RequestOp { request: Some(RequestOpRequest::RequestPut(PutRequest { key: b"k".to_vec(), ..Default::default() })) }], failure: vec![] };
        let want = TxnRequest { compare: vec![], success: vec![], failure: vec![RequestOp { request: Some(RequestOpRequest::RequestTxn(inner)) }] };
        let mut rng = Rng(7);
        let (mut put, mut txn, mut op, mut top) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..10 {
            unknown(&mut rng, &mut txn);
            unknown(&mut rng, &mut op);
            unknown(&mut rng, &mut top);
        }
        field(1, b"k", &mut put);
        let mut put_op = Vec::new();
        field(2, &put, &mut put_op);
        unknown(&mut rng, &mut put_op);
        field(2, &put_op, &mut txn);
        field(4, &txn, &mut op);
        field(3, &op, &mut top);
        unknown(&mut rng, &mut top);
        assert_eq!(decode_request(&top, 2), Ok(want));
    }

    /// A chain of txns `levels` deep, each with one op (field `op_field`:
    /// 2 in a request, 3 in a response) holding the next (field 4); the
    /// innermost holds `leaf`. Built without recursion, so it may be
    /// deeper than any recursive encoder could go.
    fn chain(levels: usize, op_field: u32, leaf: &[u8]) -> Vec<u8> {
        let varint_len = |n: usize| prost::encoding::encoded_len_varint(n as u64);
        // txn[i]: the length of the txn i levels above the innermost.
        let mut txn = vec![leaf.len()];
        let mut op = vec![0];
        for i in 1..levels {
            op.push(1 + varint_len(txn[i - 1]) + txn[i - 1]);
            txn.push(1 + varint_len(op[i]) + op[i]);
        }
        let mut out = Vec::with_capacity(txn[levels - 1]);
        for i in (1..levels).rev() {
            encode_key(op_field, WireType::LengthDelimited, &mut out);
            encode_varint(op[i] as u64, &mut out);
            encode_key(4, WireType::LengthDelimited, &mut out);
            encode_varint(txn[i - 1] as u64, &mut out);
        }
        out.extend_from_slice(leaf);
        out
    }

    fn request_depth(mut t: &TxnRequest) -> usize {
        let mut depth = 1;
        while let Some(RequestOpRequest::RequestTxn(inner)) = t.success.first().and_then(|op| op.request.as_ref()) {
            (t, depth) = (inner, depth + 1);
        }
        depth
    }

    fn response_depth(mut t: &TxnResponse) -> usize {
        let mut depth = 1;
        while let Some(ResponseOpResponse::ResponseTxn(inner)) = t.responses.first().and_then(|op| op.response.as_ref()) {
            (t, depth) = (inner, depth + 1);
        }
        depth
    }

    #[test]
    fn depth_is_bounded_by_the_budget_not_by_prost() {
        let mut put = Vec::new();
        field(2, &PutRequest { key: b"k".to_vec(), ..Default::default() }.encode_to_vec(), &mut put);
        let mut leaf = Vec::new();
        field(2, &put, &mut leaf);
        // prost gives up at about 50 levels.
        assert!(TxnRequest::decode(&chain(60, 2, &leaf)[..]).is_err());
        for (levels, max) in [(1, 1), (60, 60), (129, 129), (129, 1000)] {
            let t = decode_request(&chain(levels, 2, &leaf), max).unwrap_or_else(|e| panic!("{levels} levels, at most {max}: {e}"));
            assert_eq!(request_depth(&t), levels);
            let r = decode_response(&chain(levels, 3, &[]), max).unwrap_or_else(|e| panic!("{levels} levels, at most {max}: {e}"));
            assert_eq!(response_depth(&r), levels);
        }
        // A chain far deeper than the stack could hold is refused at the
        // budget, as is anything at a budget of 0.
        for (levels, max) in [(130, 129), (2, 1), (1_000_000, 129), (1, 0)] {
            assert_eq!(decode_request(&chain(levels, 2, &leaf), max), Err(DecodeError::TooDeep { max_depth: max }), "{levels} levels");
            assert_eq!(decode_response(&chain(levels, 3, &[]), max), Err(DecodeError::TooDeep { max_depth: max }), "{levels} levels");
        }
    }

    #[test]
    fn malformed_input_is_an_error() {
        let cases: [&[u8]; 5] = [
            // Wire type 7 does not exist.
            &[0x0f, 0xff, 0xff, 0xff],
            // success (2) with a length past the end.
            &[0x12, 0x05, 0x22],
            // success as a varint, not a message.
            &[0x10, 0x01],
            // A nested txn that ends inside a varint.
            &[0x12, 0x03, 0x22, 0x01, 0x08],
            // Field number 0.
            &[0x02, 0x00],
        ];
        for bytes in cases {
            assert!(decode_request(bytes, 10).is_err(), "{bytes:?}");
            assert!(TxnRequest::decode(bytes).is_err(), "prost agrees: {bytes:?}");
        }
        assert_eq!(decode_request(&[0x12, 0x05, 0x22], 10), Err(DecodeError::Truncated));
        assert!(decode_response(&[0x1a, 0x02, 0x22, 0x09], 10).is_err());
    }
}
