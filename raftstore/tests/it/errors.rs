//! Bad input gets etcd's exact gRPC code and message, never a hang. Each case
//! runs against real etcd too, which proves the expected strings.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, DeleteOptions, GetOptions, LeaseGrantOptions, PutOptions, Txn, TxnOp};
use tonic::Code;

use crate::common::{block_on, for_each_kind, status_of, within, Server};

/// etcd's default `--max-request-bytes` (1.5 MiB).
const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024 / 2;
/// etcd's gRPC receive limit: max request bytes plus 512 KiB of overhead.
const GRPC_LIMIT: usize = MAX_REQUEST_BYTES + 512 * 1024;

/// One bad (or boundary) request.
#[derive(Debug)]
enum Req {
    Put { key: Vec<u8>, value: Vec<u8>, opts: PutOptions },
    Get { key: &'static str, opts: GetOptions },
    Delete { key: &'static str, opts: Option<DeleteOptions> },
    Txn(Txn),
    Compact(i64),
    LeaseGrant { ttl: i64, id: i64 },
    LeaseRevoke(i64),
}

/// What a case expects: success, or this code and exact message. `None` as
/// the message checks the code only.
type Want = Result<(), (Code, Option<&'static str>)>;

fn err(code: Code, msg: &'static str) -> Want {
    Err((code, Some(msg)))
}

fn put(key: &str, value: &str) -> Req {
    Req::Put { key: key.into(), value: value.into(), opts: PutOptions::new() }
}

fn puts(n: usize) -> Vec<TxnOp> {
    (0..n).map(|i| TxnOp::put(format!("t/{i:03}"), "v", None)).collect()
}

/// The fixed state every case runs on: `k` written at revisions 2 to 5, the
/// store compacted at 4, lease 7777 granted.
async fn setup(c: &mut Client) {
    for v in ["1", "2", "3", "4"] {
        c.put("k", v, None).await.expect("setup put");
    }
    c.compact(4, None).await.expect("setup compact");
    c.lease_grant(600, Some(LeaseGrantOptions::new().with_id(7777))).await.expect("setup lease");
}

fn cases() -> Vec<(&'static str, Req, Want)> {
    vec![
        (
            "request just over --max-request-bytes",
            Req::Put { key: b"big".to_vec(), value: vec![b'x'; MAX_REQUEST_BYTES + 1024], opts: PutOptions::new() },
            err(Code::InvalidArgument, "etcdserver: request is too large"),
        ),
        ("request over the gRPC limit", Req::Put { key: b"big".to_vec(), value: vec![b'x'; GRPC_LIMIT + 1024], opts: PutOptions::new() }, Err((Code::ResourceExhausted, None))),
        ("request well under the limit", Req::Put { key: b"big".to_vec(), value: vec![b'x'; MAX_REQUEST_BYTES - 64 * 1024], opts: PutOptions::new() }, Ok(())),
        ("put with an unknown lease", Req::Put { key: b"k".to_vec(), value: b"v".to_vec(), opts: PutOptions::new().with_lease(0x1234) }, err(Code::NotFound, "etcdserver: requested lease not found")),
        ("put with an empty key", put("", "v"), err(Code::InvalidArgument, "etcdserver: key is not provided")),
        ("range with an empty key", Req::Get { key: "", opts: GetOptions::new() }, err(Code::InvalidArgument, "etcdserver: key is not provided")),
        ("delete with an empty key", Req::Delete { key: "", opts: None }, err(Code::InvalidArgument, "etcdserver: key is not provided")),
        ("txn put with an empty key", Req::Txn(Txn::new().and_then([TxnOp::put("", "v", None)])), err(Code::InvalidArgument, "etcdserver: key is not provided")),
        (
            "put ignore_value on an absent key",
            Req::Put { key: b"absent".to_vec(), value: vec![], opts: PutOptions::new().with_ignore_value() },
            err(Code::InvalidArgument, "etcdserver: key not found"),
        ),
        (
            "put ignore_value with a value",
            Req::Put { key: b"k".to_vec(), value: b"v".to_vec(), opts: PutOptions::new().with_ignore_value() },
            err(Code::InvalidArgument, "etcdserver: value is provided"),
        ),
        (
            "put ignore_lease with a lease",
            Req::Put { key: b"k".to_vec(), value: b"v".to_vec(), opts: PutOptions::new().with_ignore_lease().with_lease(7777) },
            err(Code::InvalidArgument, "etcdserver: lease is provided"),
        ),
        ("txn with 129 operations", Req::Txn(Txn::new().and_then(puts(129))), err(Code::InvalidArgument, "etcdserver: too many operations in txn request")),
        ("txn with 129 operations in the failure branch", Req::Txn(Txn::new().or_else(puts(129))), err(Code::InvalidArgument, "etcdserver: too many operations in txn request")),
        ("txn with 128 operations", Req::Txn(Txn::new().and_then(puts(128))), Ok(())),
        (
            "txn putting one key twice",
            Req::Txn(Txn::new().and_then([TxnOp::put("d", "1", None), TxnOp::put("d", "2", None)])),
            err(Code::InvalidArgument, "etcdserver: duplicate key given in txn request"),
        ),
        (
            "txn putting a key a delete range covers",
            Req::Txn(Txn::new().and_then([TxnOp::put("d/1", "1", None), TxnOp::delete("d/", Some(DeleteOptions::new().with_prefix()))])),
            err(Code::InvalidArgument, "etcdserver: duplicate key given in txn request"),
        ),
        (
            "txn putting a key in a nested txn and outside it",
            Req::Txn(Txn::new().and_then([TxnOp::put("d", "1", None), TxnOp::txn(Txn::new().and_then([TxnOp::put("d", "2", None)]))])),
            err(Code::InvalidArgument, "etcdserver: duplicate key given in txn request"),
        ),
        (
            "txn putting one key in each branch",
            Req::Txn(Txn::new().when([Compare::version("k", CompareOp::Greater, 0)]).and_then([TxnOp::put("d", "1", None)]).or_else([TxnOp::put("d", "2", None)])),
            Ok(()),
        ),
        ("txn reading a key twice", Req::Txn(Txn::new().and_then([TxnOp::get("k", None), TxnOp::get("k", None)])), Ok(())),
        ("range at a future revision", Req::Get { key: "k", opts: GetOptions::new().with_revision(100) }, err(Code::OutOfRange, "etcdserver: mvcc: required revision is a future revision")),
        ("range at a compacted revision", Req::Get { key: "k", opts: GetOptions::new().with_revision(3) }, err(Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted")),
        ("range at the compact revision", Req::Get { key: "k", opts: GetOptions::new().with_revision(4) }, Ok(())),
        (
            "txn range at a compacted revision",
            Req::Txn(Txn::new().and_then([TxnOp::get("k", Some(GetOptions::new().with_revision(2)))])),
            err(Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted"),
        ),
        ("compact at a compacted revision", Req::Compact(3), err(Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted")),
        ("compact at a future revision", Req::Compact(100), err(Code::OutOfRange, "etcdserver: mvcc: required revision is a future revision")),
        ("lease with a TTL over the maximum", Req::LeaseGrant { ttl: 9_000_000_001, id: 0 }, err(Code::OutOfRange, "etcdserver: too large lease TTL")),
        ("lease with an ID in use", Req::LeaseGrant { ttl: 60, id: 7777 }, err(Code::FailedPrecondition, "etcdserver: lease already exists")),
        ("revoke of an unknown lease", Req::LeaseRevoke(0x4321), err(Code::NotFound, "etcdserver: requested lease not found")),
    ]
}

async fn send(c: &mut Client, req: Req) -> Result<(), etcd_client::Error> {
    match req {
        Req::Put { key, value, opts } => c.put(key, value, Some(opts)).await.map(drop),
        Req::Get { key, opts } => c.get(key, Some(opts)).await.map(drop),
        Req::Delete { key, opts } => c.delete(key, opts).await.map(drop),
        Req::Txn(txn) => c.txn(txn).await.map(drop),
        Req::Compact(rev) => c.compact(rev, None).await.map(drop),
        Req::LeaseGrant { ttl, id } => c.lease_grant(ttl, Some(LeaseGrantOptions::new().with_id(id))).await.map(drop),
        Req::LeaseRevoke(id) => c.lease_revoke(id).await.map(drop),
    }
}

#[test]
fn bad_requests_get_etcd_errors() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut c = s.client().await;
            setup(&mut c).await;
            let mut wrong = Vec::new();
            for (name, req, want) in cases() {
                let got = within(Duration::from_secs(20), name, send(&mut c, req)).await;
                let got = got.map_err(|e| status_of(&e));
                let ok = match (&got, &want) {
                    (Ok(()), Ok(())) => true,
                    (Err((code, msg)), Err((want_code, want_msg))) => code == want_code && want_msg.is_none_or(|m| m == msg),
                    _ => false,
                };
                if !ok {
                    wrong.push(format!("{name}: want {want:?}, got {got:?}"));
                }
            }
            assert!(wrong.is_empty(), "{} cases differ from etcd:\n{}", wrong.len(), wrong.join("\n"));

            // The server still works after all that.
            let r = c.put("after", "v", None).await.expect("put after errors");
            assert!(r.header().map(|h| h.revision()).unwrap_or(0) > 5);
        });
    });
}
