//! The recorded history of one chaos run: every client operation with its
//! invocation and completion time (monotonic nanoseconds since the run
//! started), every watch response, and the reference event stream ("truth")
//! read after the cluster healed. The whole [`History`] serialises to JSON so
//! a failing run can be checked again with `chaos check --history FILE`.
//!
//! Revisions are etcd revisions (`header.revision`, `mod_revision`,
//! `create_revision`): one store-wide counter that grows by one per
//! modifying request (etcd api_guarantees).

use serde::{Deserialize, Serialize};

/// A key-value pair as the store returned it (etcd `mvccpb.KeyValue`).
/// Keys and values are UTF-8 in this harness's workload.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    /// The key.
    pub key: String,
    /// The value (unique per write in the workload).
    pub value: String,
    /// Revision of the last modification.
    pub mod_revision: i64,
    /// Revision of the creation (the first put after absence).
    pub create_revision: i64,
    /// Number of puts since creation (1 for a fresh key).
    pub version: i64,
    /// Attached lease ID, 0 for none.
    pub lease: i64,
}

/// A client request, as the workload issued it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// `Put(key, value)` with an optional lease (0 = none).
    Put {
        /// Key.
        key: String,
        /// Unique value.
        value: String,
        /// Lease ID or 0.
        lease: i64,
    },
    /// Linearizable `Range(key)`.
    Get {
        /// Key.
        key: String,
    },
    /// `Txn(If mod_revision(key) == expected Then Put(key, value))`.
    Cas {
        /// Key.
        key: String,
        /// Expected mod_revision; 0 means "absent".
        expected_mod_revision: i64,
        /// Unique value.
        value: String,
    },
    /// `DeleteRange(key)`.
    Delete {
        /// Key.
        key: String,
    },
    /// `LeaseGrant(ttl)`.
    LeaseGrant {
        /// TTL in seconds.
        ttl: i64,
    },
    /// `LeaseRevoke(lease)`; deletes the keys attached to it.
    LeaseRevoke {
        /// Lease ID.
        lease: i64,
    },
}

impl Request {
    /// The key this request touches, if it is a KV request.
    pub fn key(&self) -> Option<&str> {
        match self {
            Request::Put { key, .. } | Request::Get { key } | Request::Cas { key, .. } | Request::Delete { key } => Some(key),
            _ => None,
        }
    }
}

/// A successful response; `revision` is always `header.revision`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    /// Put succeeded at `revision`.
    Put {
        /// header.revision (the revision of this write).
        revision: i64,
    },
    /// Range result.
    Get {
        /// header.revision (the store revision the read was served at).
        revision: i64,
        /// The key's pair, or `None` if absent.
        kv: Option<Kv>,
    },
    /// Txn result.
    Cas {
        /// header.revision (the write's revision when `succeeded`).
        revision: i64,
        /// Whether the compare held.
        succeeded: bool,
    },
    /// DeleteRange result.
    Delete {
        /// header.revision (the write's revision when `deleted > 0`).
        revision: i64,
        /// Number of keys deleted.
        deleted: i64,
    },
    /// LeaseGrant result.
    LeaseGrant {
        /// header.revision.
        revision: i64,
        /// The granted lease ID.
        lease: i64,
    },
    /// LeaseRevoke result.
    LeaseRevoke {
        /// header.revision.
        revision: i64,
    },
}

impl Response {
    /// `header.revision` of the response.
    pub fn revision(&self) -> i64 {
        match self {
            Response::Put { revision }
            | Response::Get { revision, .. }
            | Response::Cas { revision, .. }
            | Response::Delete { revision, .. }
            | Response::LeaseGrant { revision, .. }
            | Response::LeaseRevoke { revision } => *revision,
        }
    }
}

/// How an operation ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The server answered with success.
    Ok {
        /// The response.
        response: Response,
    },
    /// A definite failure: the request had no effect (e.g. InvalidArgument,
    /// NotFound "etcdserver: requested lease not found").
    Failed {
        /// The error text.
        error: String,
    },
    /// Unknown outcome (timeout, Unavailable, broken connection): the request
    /// may or may not have taken effect, at any time after its invocation.
    Unknown {
        /// The error text.
        error: String,
    },
}

/// One client operation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Client (worker) number; operations of one client are sequential.
    pub client: usize,
    /// Member index the client talked to.
    pub member: usize,
    /// Invocation time, ns since the run started.
    pub call_ns: u64,
    /// Completion time, ns since the run started (for `Unknown`, when the
    /// client gave up; the effect may come later).
    pub return_ns: u64,
    /// The request.
    pub request: Request,
    /// The outcome.
    pub outcome: Outcome,
}

/// Event type (etcd `mvccpb.Event.EventType`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

/// One watch event.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// PUT or DELETE.
    pub kind: EventKind,
    /// The pair after the event; for a delete, the key and `mod_revision`
    /// (the delete's revision) only.
    pub kv: Kv,
    /// The pair before the event, when the watch asked for prev_kv.
    pub prev_kv: Option<Kv>,
}

/// One watch response as received.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WatchResponse {
    /// Arrival time, ns since the run started.
    pub time_ns: u64,
    /// header.revision.
    pub header_revision: i64,
    /// Events (empty for a progress notification).
    pub events: Vec<Event>,
}

impl WatchResponse {
    /// A response with no events is a progress notification (bookmark):
    /// every event up to `header_revision` has been sent (etcd
    /// api_guarantees, "Bookmarkable").
    pub fn is_progress(&self) -> bool {
        self.events.is_empty()
    }
}

/// One watch stream: created at `start_revision` on `member`, ended by an
/// error, a stall or the end of the run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WatchSession {
    /// Member index.
    pub member: usize,
    /// start_revision of the create request.
    pub start_revision: i64,
    /// Responses after the "created" one, in arrival order.
    pub responses: Vec<WatchResponse>,
    /// Why the stream ended, if it ended early.
    pub error: Option<String>,
}

/// One logical watcher: a sequence of sessions, each resuming at the last
/// delivered revision + 1.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Watcher {
    /// Watcher number.
    pub id: usize,
    /// Sessions in order.
    pub sessions: Vec<WatchSession>,
}

/// A member's view at the end of the run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MemberFinal {
    /// Member index.
    pub member: usize,
    /// Range of the workload prefix at the final revision.
    pub kvs: Vec<Kv>,
    /// Maintenance.HashKV at the final revision.
    pub hash_kv: u32,
    /// The event stream of the workload prefix from revision 1 to the final
    /// revision, read from this member.
    pub events: Vec<Event>,
}

/// Everything a checker needs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct History {
    /// `raftstore` or `etcd`.
    pub target: String,
    /// Fault name.
    pub fault: String,
    /// Key prefix of the workload (watched range = this prefix).
    pub prefix: String,
    /// Client operations.
    pub operations: Vec<Operation>,
    /// Watchers.
    pub watchers: Vec<Watcher>,
    /// The final revision (the sentinel write's revision); 0 if the run did
    /// not reach the end phase.
    pub final_revision: i64,
    /// Per-member final views; the first is the reference ("truth").
    pub members: Vec<MemberFinal>,
}

impl History {
    /// The reference event stream: the first member's final events.
    pub fn truth(&self) -> &[Event] {
        self.members.first().map(|m| m.events.as_slice()).unwrap_or(&[])
    }
}
