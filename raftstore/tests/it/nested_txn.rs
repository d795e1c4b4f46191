//! Txns nested as deep as etcd's op budget allows, beyond prost's recursion
//! limit (about 50 levels): etcd (3.4, `--max-txn-ops` 128) runs a chain
//! of single-op txns 128 deep with a put innermost, and 129 deep with an
//! empty txn innermost; one level more is refused with InvalidArgument,
//! `etcdserver: too many operations in txn request`, however deep.
//!
//! The requests are sent and their answers decoded by a raw gRPC client
//! ([`txn`]): etcd-client decodes a TxnResponse with prost and would refuse
//! the deep answers, and etcdctl cannot nest txns.

use std::time::Duration;

use bytes::{Buf, BufMut};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use prost::Message;
use proto::etcdserverpb::{PutRequest, RequestOp, RequestOpRequest, ResponseOpResponse, TxnRequest, TxnResponse};
use proto::nested_txn;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};

use crate::common::cluster::{hashes_at, leader_proc, put_until_ok, start_new, Proc};
use crate::common::{block_on, connect, for_each_kind, within, Server};

const WAIT: Duration = Duration::from_secs(20);

/// How deep an answer this client decodes: more than either server sends.
const CLIENT_MAX_DEPTH: usize = 1000;

/// etcd's answer to a txn over its op budget.
const TOO_MANY_OPS: (Code, &str) = (Code::InvalidArgument, "etcdserver: too many operations in txn request");

/// Sends request bytes as they are, decodes answers with `nested_txn`.
struct TxnCodec;

impl Codec for TxnCodec {
    type Encode = Vec<u8>;
    type Decode = TxnResponse;
    type Encoder = TxnCodec;
    type Decoder = TxnCodec;
    fn encoder(&mut self) -> TxnCodec {
        TxnCodec
    }
    fn decoder(&mut self) -> TxnCodec {
        TxnCodec
    }
}

impl Encoder for TxnCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for TxnCodec {
    type Item = TxnResponse;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<TxnResponse>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        nested_txn::decode_response(&bytes, CLIENT_MAX_DEPTH).map(Some).map_err(|e| Status::internal(format!("test client: {e}")))
    }
}

/// `KV.Txn` with `request` (encoded, or garbage) on a fresh connection to
/// `endpoint` (`http://host:port`).
async fn txn(endpoint: &str, request: Vec<u8>) -> Result<TxnResponse, Status> {
    let channel = tonic::transport::Channel::from_shared(endpoint.to_owned()).expect("endpoint").connect_timeout(WAIT).connect().await.expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let call = grpc.unary(tonic::Request::new(request), http::uri::PathAndQuery::from_static("/etcdserverpb.KV/Txn"), TxnCodec);
    within(WAIT, "Txn", call).await.map(tonic::Response::into_inner)
}

/// A txn that puts `key` = `value`, encoded.
fn put(key: &str, value: &str) -> Vec<u8> {
    let put = PutRequest { key: key.into(), value: value.into(), ..Default::default() };
    TxnRequest { success: vec![RequestOp { request: Some(RequestOpRequest::RequestPut(put)) }], ..Default::default() }.encode_to_vec()
}

/// A chain of txns `levels` deep, each with one op (in `success`) holding
/// the next; the innermost is `innermost`, an encoded TxnRequest. Built
/// from the inside out's lengths without recursion, so that it may be far
/// deeper than a recursive encoder could go.
fn chain(levels: usize, innermost: &[u8]) -> Vec<u8> {
    let varint_len = |n: usize| encoded_len_varint(n as u64);
    // txn[i], op[i]: the lengths of the txn i levels above the innermost
    // and of its one op.
    let mut txn = vec![innermost.len()];
    let mut op = vec![0];
    for i in 1..levels {
        op.push(1 + varint_len(txn[i - 1]) + txn[i - 1]);
        txn.push(1 + varint_len(op[i]) + op[i]);
    }
    let mut out = Vec::with_capacity(txn[levels - 1]);
    for i in (1..levels).rev() {
        encode_key(2, WireType::LengthDelimited, &mut out);
        encode_varint(op[i] as u64, &mut out);
        encode_key(4, WireType::LengthDelimited, &mut out);
        encode_varint(txn[i - 1] as u64, &mut out);
    }
    out.extend_from_slice(innermost);
    out
}

/// How deep a chain's answer nests, and its innermost txn's answer.
fn innermost(mut r: &TxnResponse) -> (usize, &TxnResponse) {
    let mut depth = 1;
    while let Some(ResponseOpResponse::ResponseTxn(inner)) = r.responses.first().and_then(|op| op.response.as_ref()) {
        assert!(r.succeeded && r.responses.len() == 1, "level {depth}: {r:?}");
        (r, depth) = (inner, depth + 1);
    }
    (depth, r)
}

/// Asserts that `r` answers `chain(levels, put(..))`: nested as deep, a
/// put answer innermost, the write at the outer header's revision.
#[track_caller]
fn assert_put_chain(r: &TxnResponse, levels: usize) -> i64 {
    let (depth, inner) = innermost(r);
    assert_eq!(depth, levels, "the answer nests as the request does");
    assert!(matches!(inner.responses.as_slice(), [op] if matches!(op.response, Some(ResponseOpResponse::ResponsePut(_)))), "{inner:?}");
    r.header.as_ref().map(|h| h.revision).expect("a header")
}

#[test]
fn a_chain_of_txns_runs_as_deep_as_the_op_budget_allows_and_no_deeper() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let r = txn(s.endpoint(), chain(128, &put("deep", "v"))).await.expect("128 levels, a put innermost");
            let rev = assert_put_chain(&r, 128);
            let mut c = s.client().await;
            let got = c.get("deep", None).await.expect("get");
            let kv = got.kvs().first().expect("the put inside is visible");
            assert_eq!((kv.value(), kv.mod_revision()), (&b"v"[..], rev));

            let r = txn(s.endpoint(), chain(129, &[])).await.expect("129 levels, the innermost empty");
            let (depth, inner) = innermost(&r);
            assert_eq!((depth, inner.responses.len()), (129, 0), "{inner:?}");

            for (name, request) in [("129 levels, a put innermost", chain(129, &put("deep", "x"))), ("130 levels", chain(130, &[])), ("100000 levels", chain(100_000, &[]))] {
                let err = txn(s.endpoint(), request).await.expect_err(name);
                assert_eq!((err.code(), err.message()), TOO_MANY_OPS, "{name}");
            }
            let got = c.get("deep", None).await.expect("get");
            assert_eq!(got.kvs().first().map(|kv| kv.value()), Some(&b"v"[..]), "the refused txns wrote nothing");
        });
    });
}

#[test]
fn a_txn_that_does_not_decode_is_refused_and_the_server_goes_on() {
    // A field with wire type 7, which does not exist.
    const GARBAGE: &[u8] = &[0x0f, 0xff, 0xff, 0xff];
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let cases = [
                ("garbage", GARBAGE.to_vec()),
                ("garbage 200 levels down", chain(200, GARBAGE)),
                ("a length past the end", vec![0x12, 0x05, 0x22]),
                ("a nested txn cut short", chain(3, &[0x12, 0x04, 0x22])),
            ];
            for (name, request) in cases {
                let err = txn(s.endpoint(), request).await.expect_err(name);
                assert_eq!(err.code(), Code::Internal, "{name}: {err:?}");
                assert!(err.message().starts_with("grpc: error unmarshalling request: "), "{name}: {err:?}");
            }
            let mut c = s.client().await;
            c.put("after", "v", None).await.expect("the server goes on");
        });
    });
}

/// A deep txn reaches the log through a follower (forwarded to the leader
/// as a command, its answer sent back as a command response) and through
/// the leader. A member that was down meanwhile gets the entries from the
/// others' logs after every member restarts, and each member's store ends
/// up the same.
#[test]
fn every_member_applies_a_deep_txn_and_keeps_it_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut members = start_new(dir.path(), 3, &[]);
    let initial = members.iter().map(Proc::cluster_entry).collect::<Vec<_>>().join(",");
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", WAIT).await;
        let (_, leader) = leader_proc(&members, 0).await;
        let (follower, down) = ((leader + 1) % 3, (leader + 2) % 3);
        members[down].kill();

        let r = txn(&members[follower].client_url(), chain(128, &put("deep/1", "v1"))).await.expect("a deep txn through a follower");
        assert_put_chain(&r, 128);
        let r = txn(&members[leader].client_url(), chain(128, &put("deep/2", "v2"))).await.expect("a deep txn through the leader");
        let rev = assert_put_chain(&r, 128);

        for m in members.iter_mut() {
            m.kill();
        }
        for m in members.iter_mut() {
            m.start(&initial, "new");
        }
        let eps: Vec<String> = members.iter().map(Proc::ep).collect();
        let hashes = within(Duration::from_secs(60), "hashes after restart", hashes_at(&eps, rev)).await;
        assert!(hashes.iter().all(|h| *h == hashes[0]), "every member holds the same data: {hashes:?}");
        for ep in &eps {
            let mut c = connect(ep).await;
            let got = c.get("deep/", Some(etcd_client::GetOptions::new().with_prefix().with_serializable())).await.expect("serializable get");
            let kvs: Vec<(&[u8], &[u8])> = got.kvs().iter().map(|kv| (kv.key(), kv.value())).collect();
            assert_eq!(kvs, [(&b"deep/1"[..], &b"v1"[..]), (b"deep/2", b"v2")], "on {ep}");
        }
    });
}
