//! Writes a follower forwards to the leader: one that provably never left
//! (the leader's port refused it) is sent again as soon as a leader can
//! take it, even when that leader is the same member back at its URL; and
//! the leader's ForwardStream answers bad requests with errors.

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut};
use prost::Message;
use proto::raftpb::{ForwardRequest, ForwardResponse};
use raftstore::command::{Command, CommandResponse};
use tokio_stream::StreamExt;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use crate::common::cluster::{put_until_ok, start_new, Proc};
use crate::common::{block_on, connect, within};

/// Index of the leader and of one follower, by member name `m<i>`.
async fn leader_and_follower(members: &[Proc]) -> (usize, usize) {
    let mut c = connect(&members[0].ep()).await;
    let leader = c.status().await.expect("status").leader();
    let list = c.member_list().await.expect("member list");
    let idx = |id: u64| list.members().iter().find(|m| m.id() == id).and_then(|m| m.name().strip_prefix('m')).and_then(|n| n.parse::<usize>().ok()).expect("a member");
    let l = idx(leader);
    (l, (l + 1) % members.len())
}

/// A write a follower could not deliver because its leader was down (the
/// connection was refused, so it provably never left) is sent again. The
/// leader killed and restarted at the same URL resumes its leadership in
/// the same term (openraft's leader restore), so the follower never sees
/// another leader: the write must still reach it promptly, not wait out
/// the request timeout for a leader change that never comes.
#[test]
fn undelivered_forward_reaches_the_leader_restarted_at_its_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut members = start_new(dir.path(), 3, &[]);
    let initial = members.iter().map(Proc::cluster_entry).collect::<Vec<_>>().join(",");
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let (l, f) = leader_and_follower(&members).await;
        let m = 3 - l - f;
        // The follower comes back with a long election timeout: it never
        // campaigns (and its leader lease makes it refuse votes), so with
        // the third member down only the old leader can lead again.
        members[f].kill();
        members[f].extra = vec!["--election-timeout".into(), "10000".into()];
        members[f].start(&initial, "existing");
        put_until_ok(&members[f].ep(), "warm", "v", Duration::from_secs(20)).await;
        assert_eq!(leader_and_follower(&members).await.0, l, "the leader stayed");
        members[l].kill();
        members[m].kill();
        // Let the follower's stream to the dead leader end first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ep = members[f].ep();
        let start = Instant::now();
        let gap = tokio::spawn(async move {
            let mut c = connect(&ep).await;
            c.put("gap", "v", None).await.map(|_| start.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The old leader comes back and leads again at once.
        members[l].start(&initial, "existing");
        let took = within(Duration::from_secs(40), "the forwarded write", gap).await.expect("join");
        let took = took.unwrap_or_else(|e| panic!("the write failed although a leader serves: {e}"));
        assert!(took < Duration::from_secs(8), "the write waited {took:?} although its leader was back");
    });
}

/// Sends request frames as given, bytes and all, and decodes answers.
struct RawFrames;

impl Codec for RawFrames {
    type Encode = Vec<u8>;
    type Decode = ForwardResponse;
    type Encoder = RawFrames;
    type Decoder = RawFrames;
    fn encoder(&mut self) -> RawFrames {
        RawFrames
    }
    fn decoder(&mut self) -> RawFrames {
        RawFrames
    }
}

impl Encoder for RawFrames {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawFrames {
    type Item = ForwardResponse;
    type Error = tonic::Status;
    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<ForwardResponse>, tonic::Status> {
        ForwardResponse::decode(buf.copy_to_bytes(buf.remaining())).map(Some).map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

/// A ForwardRequest frame with id `id` that puts `key` = "v".
fn put_frame(key: &str, id: u64) -> Vec<u8> {
    let cmd = Command::Put(proto::etcdserverpb::PutRequest { key: key.into(), value: b"v".to_vec(), ..Default::default() });
    ForwardRequest { command: cmd.encode(), id }.encode_to_vec()
}

/// Opens a ForwardStream to the member at `peer_url` that sends `frames`
/// as they are and then stays open.
async fn raw_forward_stream(peer_url: String, frames: Vec<Vec<u8>>) -> tonic::Streaming<ForwardResponse> {
    let ch = tonic::transport::Endpoint::from_shared(peer_url).expect("url").connect().await.expect("dial the peer port");
    let mut grpc = tonic::client::Grpc::new(ch);
    grpc.ready().await.expect("ready");
    let path = http::uri::PathAndQuery::from_static("/raftpb.RaftTransport/ForwardStream");
    grpc.streaming(tonic::Request::new(tokio_stream::iter(frames).chain(tokio_stream::pending())), path, RawFrames).await.expect("open").into_inner()
}

/// A ForwardStream request whose command is garbage gets an error answer
/// with its id; one that is not a ForwardRequest at all (tonic reads no
/// further) ends the stream with InvalidArgument once the earlier requests
/// are answered, rather than a silent OK that leaves its sender and those
/// after it without a word. The member keeps serving.
#[test]
fn forward_stream_answers_malformed_requests_with_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let members = start_new(dir.path(), 1, &[]);
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let frames = [
            put_frame("a", 1),
            ForwardRequest { command: vec![0xff, 1, 2], id: 2 }.encode_to_vec(),
            // Field 1 (bytes) with a length past the end of the message.
            vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
            put_frame("b", 4),
        ];
        let mut answers = raw_forward_stream(members[0].peer_url(), frames.to_vec()).await;
        let mut got = std::collections::BTreeMap::new();
        let end = loop {
            match within(Duration::from_secs(10), "forward answers", answers.next()).await {
                Some(Ok(a)) => {
                    got.insert(a.id, a);
                }
                other => break other,
            }
        };
        assert_eq!(got.keys().copied().collect::<Vec<_>>(), [1, 2], "{got:?}");
        assert!(got[&1].message.is_empty() && matches!(CommandResponse::decode(&got[&1].response), Ok(CommandResponse::Put(_))), "{:?}", got[&1]);
        assert!(got[&2].message.contains("unknown command tag"), "{:?}", got[&2]);
        match end {
            Some(Err(st)) => assert_eq!(st.code(), tonic::Code::InvalidArgument, "{st:?}"),
            other => panic!("the stream must end with an error after a malformed request, not {other:?}"),
        }
        let mut c = connect(&members[0].ep()).await;
        c.put("after", "v", None).await.expect("the member keeps serving");
    });
}

/// Commands nested deep on a ForwardStream get error answers with their
/// ids rather than overflowing the member's stack: a forged megabyte of
/// identity wrappers (two bytes each), and a txn nested deeper than
/// `MAX_TXN_DEPTH`. A txn as deep as etcd's op budget allows is applied,
/// and its answer nests as deep.
#[test]
fn forward_stream_refuses_commands_nested_too_deep() {
    use proto::etcdserverpb::{RequestOp, RequestOpRequest, ResponseOpResponse, TxnRequest};
    use raftstore::command::MAX_TXN_DEPTH;
    let nest = |levels: usize| {
        let put = proto::etcdserverpb::PutRequest { key: b"deep".to_vec(), value: b"v".to_vec(), ..Default::default() };
        let mut t = TxnRequest { success: vec![RequestOp { request: Some(RequestOpRequest::RequestPut(put)) }], ..Default::default() };
        for _ in 1..levels {
            t = TxnRequest { success: vec![RequestOp { request: Some(RequestOpRequest::RequestTxn(t)) }], ..Default::default() };
        }
        Command::Txn(t).encode()
    };
    // The tag and an empty header: one identity wrapper.
    let wrapper = Command::Authed(Default::default(), Box::new(Command::Compact(Default::default()))).encode()[..2].to_vec();
    let dir = tempfile::tempdir().expect("tempdir");
    let members = start_new(dir.path(), 1, &[]);
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let frames = [(wrapper.repeat(500_000), 1), (nest(MAX_TXN_DEPTH + 1), 2), (nest(128), 3)].map(|(command, id)| ForwardRequest { command, id }.encode_to_vec());
        let mut answers = raw_forward_stream(members[0].peer_url(), frames.to_vec()).await;
        let mut got = std::collections::BTreeMap::new();
        while got.len() < 3 {
            let a = within(Duration::from_secs(10), "forward answers", answers.next()).await.expect("an answer").expect("an answer, not an error");
            got.insert(a.id, a);
        }
        assert!(got[&1].message.contains("an authed command inside another"), "{:?}", got[&1].message);
        assert!(got[&2].message.contains("txn nested deeper than"), "{:?}", got[&2].message);
        let Ok(CommandResponse::Txn(mut r)) = CommandResponse::decode(&got[&3].response) else { panic!("{:?}", got[&3]) };
        let mut depth = 1;
        while let Some(ResponseOpResponse::ResponseTxn(inner)) = r.responses.pop().and_then(|op| op.response) {
            (r, depth) = (inner, depth + 1);
        }
        assert_eq!(depth, 128);
        let mut c = connect(&members[0].ep()).await;
        c.put("after", "v", None).await.expect("the member keeps serving");
    });
}

/// Writes sent to a follower travel to the leader over one shared forward
/// stream, and answers come back in completion order: each concurrent write
/// must still get its own answer (its own revision and its own previous
/// value), and a forwarded write's etcd error must come back as that error.
#[test]
fn concurrent_writes_through_a_follower_get_their_own_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let members = start_new(dir.path(), 3, &[]);
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let (_, follower) = leader_and_follower(&members).await;
        let client = connect(&members[follower].ep()).await;
        const N: usize = 64;
        // Round 1: distinct keys, each answer has its own revision.
        let first: Vec<i64> = futures::future::join_all((0..N).map(|i| {
            let mut c = client.clone();
            async move { c.put(format!("fw/{i}"), format!("one-{i}"), None).await.expect("forwarded put").header().map(|h| h.revision()).unwrap_or(0) }
        }))
        .await;
        let mut revs = first.clone();
        revs.sort_unstable();
        revs.dedup();
        assert_eq!(revs.len(), N, "every forwarded write took its own revision: {first:?}");
        // Round 2: each answer's prev_kv is the value written to its key.
        let second = futures::future::join_all((0..N).map(|i| {
            let mut c = client.clone();
            async move {
                let r = c.put(format!("fw/{i}"), format!("two-{i}"), Some(etcd_client::PutOptions::new().with_prev_key())).await.expect("forwarded put");
                (i, r.prev_key().map(|kv| (kv.key_str().unwrap_or("").to_string(), kv.value_str().unwrap_or("").to_string())))
            }
        }))
        .await;
        for (i, prev) in second {
            assert_eq!(prev, Some((format!("fw/{i}"), format!("one-{i}"))), "answer {i} belongs to its own request");
        }
        // A forwarded write that fails on the leader fails with etcd's error.
        let mut c = client.clone();
        let err = c.put("fw/lease", "v", Some(etcd_client::PutOptions::new().with_lease(0x1234))).await.expect_err("unknown lease");
        assert!(err.to_string().contains("etcdserver: requested lease not found"), "{err}");
    });
}

/// The leader works on at most FORWARD_WINDOW forwarded writes of one
/// stream at a time (later requests wait for room, unread answers hold
/// theirs): a follower that sends more than twice that many at once, and
/// reads no answer for two seconds, still gets every write applied once and
/// answered once, by id. The window may make writes wait, never fail.
#[test]
fn forward_stream_over_its_window_answers_everything() {
    use raftstore::raft::network::FORWARD_WINDOW;
    let dir = tempfile::tempdir().expect("tempdir");
    let members = start_new(dir.path(), 1, &[]);
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let n = (2 * FORWARD_WINDOW + 10) as u64;
        let frames: Vec<Vec<u8>> = (1..=n).map(|id| put_frame(&format!("win/{id}"), id)).collect();
        let mut answers = raw_forward_stream(members[0].peer_url(), frames).await;
        // Read nothing for a while: the leader must hold back, not fail.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut ids = std::collections::BTreeSet::new();
        while (ids.len() as u64) < n {
            match within(Duration::from_secs(30), "forward answers", answers.next()).await {
                Some(Ok(a)) => {
                    assert!(a.message.is_empty(), "write {} failed: {}", a.id, a.message);
                    assert!(ids.insert(a.id), "answer {} came twice", a.id);
                }
                other => panic!("the stream ended after {} of {n} answers: {other:?}", ids.len()),
            }
        }
        assert_eq!(ids, (1..=n).collect(), "every write answered");
        let mut c = connect(&members[0].ep()).await;
        let r = c.get("win/", Some(etcd_client::GetOptions::new().with_prefix().with_count_only())).await.expect("count");
        assert_eq!(r.count(), n as i64, "every write applied once");
    });
}
