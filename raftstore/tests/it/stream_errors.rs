//! Streams and edge cases where etcd answers with an error or a cancelled
//! watch rather than a plain result: a frame that does not decode, a
//! duplicate or empty watch, a watch from a compacted negative revision,
//! `Compact(0)` and deeply nested txns. Each case runs against real etcd
//! first, which proves the expectation, then against raftstore.
//!
//! The streams are driven by a raw gRPC client ([`RawStream`]) so that a
//! test can send bytes that are not a valid message, and can send watch
//! requests that the etcd-client crate would never build.

use std::marker::PhantomData;
use std::time::Duration;

use bytes::{Buf, BufMut};
use etcd_client::proto::PbWatchResponse;
use etcd_client::WatchOptions;
use prost::Message;
use proto::etcdserverpb::{LeaseKeepAliveResponse, WatchRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};

use crate::common::{block_on, for_each_kind, within, Server};

const WAIT: Duration = Duration::from_secs(10);

/// Sends frames as given (already encoded, or garbage) and decodes answers
/// as `R`.
struct RawCodec<R>(PhantomData<R>);

impl<R> Default for RawCodec<R> {
    fn default() -> Self {
        RawCodec(PhantomData)
    }
}

struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

struct MessageDecoder<R>(PhantomData<R>);

impl<R: Message + Default> Decoder for MessageDecoder<R> {
    type Item = R;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<R>, Status> {
        let msg = R::decode(src.copy_to_bytes(src.remaining())).map_err(|e| Status::internal(format!("test client: {e}")))?;
        Ok(Some(msg))
    }
}

impl<R: Message + Default + Send + 'static> Codec for RawCodec<R> {
    type Encode = Vec<u8>;
    type Decode = R;
    type Encoder = RawEncoder;
    type Decoder = MessageDecoder<R>;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> MessageDecoder<R> {
        MessageDecoder(PhantomData)
    }
}

/// One bidirectional gRPC stream on a fresh connection.
struct RawStream<R> {
    tx: mpsc::Sender<Vec<u8>>,
    rx: tonic::Streaming<R>,
}

impl<R: Message + Default + Send + 'static> RawStream<R> {
    /// Opens the stream with `first` as its first frame: a server may hold
    /// its response headers back until a request arrived (grpc-go does).
    /// A server that fails the stream before it answers ends the call at
    /// once: that status is the `Err`.
    async fn open(endpoint: &str, path: &'static str, first: Vec<u8>) -> Result<Self, Status> {
        let channel = tonic::transport::Channel::from_shared(endpoint.to_owned()).expect("endpoint").connect_timeout(WAIT).connect().await.expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.expect("ready");
        let (tx, rx) = mpsc::channel(8);
        tx.send(first).await.expect("queue the first frame");
        let call = grpc.streaming(tonic::Request::new(ReceiverStream::new(rx)), http::uri::PathAndQuery::from_static(path), RawCodec::<R>::default());
        let resp = within(WAIT, "stream headers", call).await?;
        Ok(RawStream { tx, rx: resp.into_inner() })
    }

    async fn send_raw(&self, frame: Vec<u8>) {
        self.tx.send(frame).await.expect("send");
    }

    /// The next answer, `Ok(None)` at a clean end, `Err` at an error end.
    async fn next(&mut self) -> Result<Option<R>, Status> {
        within(WAIT, "stream answer", self.rx.message()).await
    }
}

impl RawStream<PbWatchResponse> {
    /// A watch stream whose first request creates this watch.
    async fn watch(endpoint: &str, key: &[u8], range_end: &[u8], start_revision: i64, watch_id: i64) -> Self {
        Self::open(endpoint, "/etcdserverpb.Watch/Watch", create(key, range_end, start_revision, watch_id)).await.expect("open a watch stream")
    }

    async fn create(&self, key: &[u8], range_end: &[u8], start_revision: i64, watch_id: i64) {
        self.send_raw(create(key, range_end, start_revision, watch_id)).await;
    }

    async fn answer(&mut self) -> PbWatchResponse {
        self.next().await.expect("watch answer").expect("the stream ended")
    }
}

/// An encoded request that creates a watch.
fn create(key: &[u8], range_end: &[u8], start_revision: i64, watch_id: i64) -> Vec<u8> {
    let opts = WatchOptions::new().with_key(key).with_range(range_end).with_start_revision(start_revision).with_watch_id(watch_id);
    let req: WatchRequest = opts.into();
    req.encode_to_vec()
}

/// A protobuf frame that no message decodes: a field tag with wire type 7,
/// which does not exist.
const GARBAGE: &[u8] = &[0x0f, 0xff, 0xff, 0xff];

#[test]
fn a_garbage_frame_ends_watch_and_keepalive_streams_with_internal() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut w = RawStream::watch(s.endpoint(), b"a", b"", 0, 0).await;
            assert!(w.answer().await.created);
            w.send_raw(GARBAGE.to_vec()).await;
            let end = w.next().await;
            let err = end.expect_err("a watch stream that got garbage must end with an error, not cleanly");
            assert_eq!(err.code(), Code::Internal, "{err:?}");

            let err = match RawStream::<LeaseKeepAliveResponse>::open(s.endpoint(), "/etcdserverpb.Lease/LeaseKeepAlive", GARBAGE.to_vec()).await {
                Ok(mut k) => k.next().await.expect_err("a keep-alive stream that got garbage must end with an error"),
                Err(status) => status,
            };
            assert_eq!(err.code(), Code::Internal, "{err:?}");
        });
    });
}

/// A client that ends its side of a watch stream (grpcurl with `-d`, or
/// any client that sends its creates and half-closes) still gets the
/// events: etcd keeps the stream open until the client goes away.
#[test]
fn a_half_closed_watch_stream_still_delivers_events() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut w = RawStream::watch(s.endpoint(), b"hc", b"", 0, 0).await;
            assert!(w.answer().await.created);
            let RawStream { tx, rx } = w;
            drop(tx);
            let mut w = RawStream { tx: mpsc::channel(1).0, rx };
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut c = s.client().await;
            c.put("hc", "1", None).await.expect("put");
            let ev = w.answer().await;
            assert_eq!(ev.events.len(), 1, "{ev:?}");
            assert_eq!(ev.events[0].kv.as_ref().expect("kv").key, b"hc", "{ev:?}");
        });
    });
}

#[test]
fn a_duplicate_watch_id_is_refused_and_the_first_watch_goes_on() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut w = RawStream::watch(s.endpoint(), b"a", b"", 0, 7).await;
            let first = w.answer().await;
            assert!(first.created && !first.canceled && first.watch_id == 7, "{first:?}");
            w.create(b"b", b"", 0, 7).await;
            let dup = w.answer().await;
            assert_eq!((dup.watch_id, dup.created, dup.canceled), (-1, true, true), "{dup:?}");
            assert_eq!(dup.cancel_reason, "mvcc: duplicate watch ID provided on the WatchStream", "{dup:?}");

            let mut c = s.client().await;
            c.put("b", "1", None).await.expect("put b");
            c.put("a", "1", None).await.expect("put a");
            let ev = w.answer().await;
            assert_eq!(ev.watch_id, 7, "{ev:?}");
            assert_eq!(ev.events.len(), 1, "{ev:?}");
            assert_eq!(ev.events[0].kv.as_ref().expect("kv").key, b"a", "only the first watch's key: {ev:?}");
        });
    });
}

#[test]
fn a_watch_whose_range_end_is_below_its_key_is_refused() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut w = RawStream::watch(s.endpoint(), b"z", b"", 0, 0).await;
            assert!(w.answer().await.created);
            for (key, end) in [(&b"b"[..], &b"a"[..]), (b"b", b"b")] {
                w.create(key, end, 0, 0).await;
                let r = w.answer().await;
                assert_eq!((r.watch_id, r.created, r.canceled), (-1, true, true), "{r:?}");
                assert_eq!(r.cancel_reason, "mvcc: watcher range is empty", "{r:?}");
            }
            // `\0` as the range end means "every key from `key` on".
            w.create(b"b", b"\0", 0, 0).await;
            let r = w.answer().await;
            assert!(r.created && !r.canceled && r.watch_id >= 0, "{r:?}");
        });
    });
}

#[test]
fn a_watch_from_a_negative_revision_after_compaction_is_cancelled_with_it() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut c = s.client().await;
            for v in ["1", "2", "3"] {
                c.put("a", v, None).await.expect("put");
            }
            c.compact(3, None).await.expect("compact");
            let mut w = RawStream::watch(s.endpoint(), b"a", b"", -5, 0).await;
            let created = w.answer().await;
            assert!(created.created, "{created:?}");
            let cancel = w.answer().await;
            assert!(cancel.canceled, "{cancel:?}");
            assert_eq!(cancel.compact_revision, 3, "{cancel:?}");
        });
    });
}

#[test]
fn compact_zero_succeeds_once_on_a_store_never_compacted() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut c = s.client().await;
            c.put("a", "1", None).await.expect("put");
            c.compact(0, None).await.expect("Compact(0) on a store never compacted");
            let hash = c.hash_kv(0).await.expect("hash_kv");
            assert_eq!(hash.compact_version(), 0, "HashKV after Compact(0)");
            let again = c.compact(0, None).await.expect_err("a second Compact(0)");
            let (code, msg) = crate::common::status_of(&again);
            assert_eq!((code, msg.as_str()), (Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted"));
        });
    });
}

/// etcd's op budget for nested txns: a nested txn may use only what its
/// parent left of `--max-txn-ops` (128), so 100 ops beside a nested txn of
/// 28 pass and of 29 are refused.
#[test]
fn nested_txns_share_the_op_budget_of_their_parent() {
    use etcd_client::{Txn, TxnOp};
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut c = s.client().await;
            let txn = |inner: usize| {
                let mut ops: Vec<TxnOp> = (0..99).map(|i| TxnOp::get(format!("o{i}"), None)).collect();
                ops.push(TxnOp::txn(Txn::new().and_then((0..inner).map(|i| TxnOp::get(format!("i{i}"), None)).collect::<Vec<_>>())));
                Txn::new().and_then(ops)
            };
            c.txn(txn(28)).await.expect("100 ops with a nested txn of 28");
            let err = c.txn(txn(29)).await.expect_err("100 ops with a nested txn of 29");
            let (code, msg) = crate::common::status_of(&err);
            assert_eq!((code, msg.as_str()), (Code::InvalidArgument, "etcdserver: too many operations in txn request"));
        });
    });
}
