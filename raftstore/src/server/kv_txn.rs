//! The KV service's gRPC server: tonic's generated one, except that
//! `/etcdserverpb.KV/Txn` is decoded by [`proto::nested_txn`] instead of
//! prost, whose recursion limit refuses a txn nested deeper than about 50
//! levels. etcd decodes any depth and then checks its op budget
//! (`--max-txn-ops`): a chain of single-op txns may be 128 deep (129 with
//! an empty txn innermost), and one level more is refused with
//! InvalidArgument, `etcdserver: too many operations in txn request`.
//!
//! Here a txn up to [`MAX_TXN_DEPTH`] levels deep is decoded and reaches
//! the same budget check ([`super::kv`]); a deeper one is refused while it
//! is decoded, with the answer etcd gives it when it is over the budget.
//! A request that is not protobuf ends with Internal, `grpc: error
//! unmarshalling request: ...`, as grpc-go words it for etcd.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Buf;
use prost::Message;
use proto::etcdserverpb::server::{Kv, KvServer as GeneratedKvServer};
use proto::etcdserverpb::{TxnRequest, TxnResponse};
use proto::nested_txn;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::BoxFuture;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};

use super::kv::KvService;
use crate::command::MAX_TXN_DEPTH;
use crate::error::Error;

const TXN_PATH: &str = "/etcdserverpb.KV/Txn";

/// etcd's KV service, [`KvService`], as a tower service for
/// [`tonic::service::Routes`].
#[derive(Clone)]
pub struct KvServer {
    kv: Arc<KvService>,
    generated: GeneratedKvServer<KvService>,
    max_decoding_message_size: usize,
}

impl KvServer {
    /// Serves `kv`; a request larger than `max_decoding_message_size`
    /// bytes is refused (ResourceExhausted, as tonic does), a response may
    /// be of any size.
    pub fn new(kv: KvService, max_decoding_message_size: usize) -> Self {
        let kv = Arc::new(kv);
        let generated = GeneratedKvServer::from_arc(kv.clone()).max_decoding_message_size(max_decoding_message_size).max_encoding_message_size(usize::MAX);
        KvServer { kv, generated, max_decoding_message_size }
    }
}

impl NamedService for KvServer {
    const NAME: &'static str = <GeneratedKvServer<KvService> as NamedService>::NAME;
}

impl tower::Service<http::Request<Body>> for KvServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() != TXN_PATH {
            return self.generated.call(req);
        }
        let (kv, limit) = (self.kv.clone(), self.max_decoding_message_size);
        Box::pin(async move {
            let mut grpc = Grpc::new(TxnCodec).apply_max_message_size_config(Some(limit), Some(usize::MAX));
            Ok(grpc.unary(Txn(kv), req).await)
        })
    }
}

/// `KV.Txn` as tonic's unary handler.
struct Txn(Arc<KvService>);

impl UnaryService<TxnRequest> for Txn {
    type Response = TxnResponse;
    type Future = BoxFuture<Response<TxnResponse>, Status>;

    fn call(&mut self, req: Request<TxnRequest>) -> Self::Future {
        let kv = self.0.clone();
        Box::pin(async move { kv.txn(req).await })
    }
}

/// Decodes a `TxnRequest` as described in the module doc.
///
/// # Errors
/// etcd's `too many operations` (InvalidArgument) for a txn deeper than
/// [`MAX_TXN_DEPTH`]; Internal for bytes that are not a `TxnRequest`.
fn decode_txn(bytes: &[u8]) -> Result<TxnRequest, Status> {
    nested_txn::decode_request(bytes, MAX_TXN_DEPTH).map_err(|e| match e {
        nested_txn::DecodeError::TooDeep { .. } => Error::TooManyOps.into(),
        e => Status::internal(format!("grpc: error unmarshalling request: {e}")),
    })
}

/// Decodes requests with [`decode_txn`], encodes responses with prost.
struct TxnCodec;

impl Codec for TxnCodec {
    type Encode = TxnResponse;
    type Decode = TxnRequest;
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
    type Item = TxnResponse;
    type Error = Status;

    fn encode(&mut self, item: TxnResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst).map_err(|e| Status::internal(e.to_string()))
    }
}

impl Decoder for TxnCodec {
    type Item = TxnRequest;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<TxnRequest>, Status> {
        decode_txn(&src.copy_to_bytes(src.remaining())).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use proto::etcdserverpb::{RequestOp, RequestOpRequest};

    use super::*;

    fn chain(levels: usize) -> Vec<u8> {
        let mut t = TxnRequest::default();
        for _ in 1..levels {
            t = TxnRequest { success: vec![RequestOp { request: Some(RequestOpRequest::RequestTxn(t)) }], ..Default::default() };
        }
        t.encode_to_vec()
    }

    #[test]
    fn over_deep_and_garbage_requests_get_etcds_answers() {
        assert!(decode_txn(&chain(MAX_TXN_DEPTH)).is_ok());
        let deep = decode_txn(&chain(MAX_TXN_DEPTH + 1)).err().unwrap_or_else(|| Status::ok(""));
        assert_eq!((deep.code(), deep.message()), (tonic::Code::InvalidArgument, "etcdserver: too many operations in txn request"));
        let garbage = decode_txn(&[0x0f, 0xff, 0xff, 0xff]).err().unwrap_or_else(|| Status::ok(""));
        assert_eq!(garbage.code(), tonic::Code::Internal);
        assert!(garbage.message().starts_with("grpc: error unmarshalling request: "), "{garbage:?}");
    }
}
