//! Wire definitions for raftstore.
//!
//! - [`etcdserverpb`] and [`mvccpb`]: the etcd v3 gRPC API (packages
//!   `etcdserverpb`, `mvccpb`, `authpb`), with the same package, service,
//!   method and message names and field numbers as etcd. The generated types
//!   come from the `etcd-client` crate's `build-server` feature; this crate
//!   re-exports them under etcd's own names so the rest of the workspace never
//!   sees the `Pb` prefixes.
//! - [`nested_txn`]: a decoder for etcd's `TxnRequest` and `TxnResponse`
//!   that accepts txns nested deeper than prost's recursion limit allows,
//!   up to a depth the caller chooses.
//! - [`v3lockpb`] and [`v3electionpb`]: etcd's Lock and Election services,
//!   generated here from our own .proto files with etcd's names and field
//!   numbers (etcd-client generates only their client side).
//! - [`raftpb`]: our internal Raft transport (vote, append entries, snapshot
//!   streaming, request forwarding, read index).
//! - [`openapiv2`]: the part of gnostic's OpenAPI v2 model (package
//!   `openapi.v2`) that `/openapi/v2` is served in as protobuf (see
//!   `proto/openapiv2.proto`).

/// etcd's `etcdserverpb` package: KV, Watch, Lease, Cluster, Maintenance
/// and Auth.
pub mod etcdserverpb {
    pub use crate::etcd_auth::etcdserverpb::{
        AuthDisableRequest, AuthDisableResponse, AuthEnableRequest, AuthEnableResponse, AuthRoleAddRequest, AuthRoleAddResponse, AuthRoleDeleteRequest, AuthRoleDeleteResponse, AuthRoleGetRequest,
        AuthRoleGetResponse, AuthRoleGrantPermissionRequest, AuthRoleGrantPermissionResponse, AuthRoleListRequest, AuthRoleListResponse, AuthRoleRevokePermissionRequest,
        AuthRoleRevokePermissionResponse, AuthStatusRequest, AuthStatusResponse, AuthUserAddRequest, AuthUserAddResponse, AuthUserChangePasswordRequest, AuthUserChangePasswordResponse,
        AuthUserDeleteRequest, AuthUserDeleteResponse, AuthUserGetRequest, AuthUserGetResponse, AuthUserGrantRoleRequest, AuthUserGrantRoleResponse, AuthUserListRequest, AuthUserListResponse,
        AuthUserRevokeRoleRequest, AuthUserRevokeRoleResponse, AuthenticateRequest, AuthenticateResponse,
    };
    pub use etcd_client::proto::{
        PbAlarmMember as AlarmMember, PbAlarmRequest as AlarmRequest, PbAlarmResponse as AlarmResponse, PbCompactionRequest as CompactionRequest, PbCompactionResponse as CompactionResponse,
        PbCompare as Compare, PbCompareTarget as CompareTarget, PbDefragmentRequest as DefragmentRequest, PbDefragmentResponse as DefragmentResponse, PbDeleteRequest as DeleteRangeRequest,
        PbDeleteResponse as DeleteRangeResponse, PbDowngradeRequest as DowngradeRequest, PbDowngradeResponse as DowngradeResponse, PbHashKvRequest as HashKvRequest,
        PbHashKvResponse as HashKvResponse, PbHashRequest as HashRequest, PbHashResponse as HashResponse, PbLeaseGrantRequest as LeaseGrantRequest, PbLeaseGrantResponse as LeaseGrantResponse,
        PbLeaseKeepAliveRequest as LeaseKeepAliveRequest, PbLeaseKeepAliveResponse as LeaseKeepAliveResponse, PbLeaseLeasesRequest as LeaseLeasesRequest, PbLeaseLeasesResponse as LeaseLeasesResponse,
        PbLeaseRevokeRequest as LeaseRevokeRequest, PbLeaseRevokeResponse as LeaseRevokeResponse, PbLeaseStatus as LeaseStatus, PbLeaseTimeToLiveRequest as LeaseTimeToLiveRequest,
        PbLeaseTimeToLiveResponse as LeaseTimeToLiveResponse, PbMember as Member, PbMemberAddRequest as MemberAddRequest, PbMemberAddResponse as MemberAddResponse,
        PbMemberListRequest as MemberListRequest, PbMemberListResponse as MemberListResponse, PbMemberPromoteRequest as MemberPromoteRequest, PbMemberPromoteResponse as MemberPromoteResponse,
        PbMemberRemoveRequest as MemberRemoveRequest, PbMemberRemoveResponse as MemberRemoveResponse, PbMemberUpdateRequest as MemberUpdateRequest, PbMemberUpdateResponse as MemberUpdateResponse,
        PbMoveLeaderRequest as MoveLeaderRequest, PbMoveLeaderResponse as MoveLeaderResponse, PbPutRequest as PutRequest, PbPutResponse as PutResponse, PbRangeRequest as RangeRequest,
        PbRangeResponse as RangeResponse, PbRangeStreamResponse as RangeStreamResponse, PbResponseHeader as ResponseHeader, PbResponseOp as ResponseOp, PbSnapshotRequest as SnapshotRequest,
        PbSnapshotResponse as SnapshotResponse, PbStatusRequest as StatusRequest, PbStatusResponse as StatusResponse, PbTargetUnion as TargetUnion, PbTxnOpRequest as RequestOpRequest,
        PbTxnOpResponse as ResponseOpResponse, PbTxnRequest as TxnRequest, PbTxnRequestOp as RequestOp, PbTxnResponse as TxnResponse, PbWatchRequest as WatchRequest,
        PbWatchRequestUnion as WatchRequestUnion, PbWatchResponse as WatchResponse,
    };

    /// Generated server traits and tower services, one per etcd service.
    pub mod server {
        pub use crate::etcd_auth::etcdserverpb::auth_server::{Auth, AuthServer};
        pub use etcd_client::proto::{
            PbClusterServer as ClusterServer, PbClusterService as Cluster, PbKvServer as KvServer, PbKvService as Kv, PbLeaseServer as LeaseServer, PbLeaseService as Lease,
            PbMaintenanceServer as MaintenanceServer, PbMaintenanceService as Maintenance, PbWatchServer as WatchServer, PbWatchService as Watch,
        };
    }

    /// `Compare.result` values (etcd rpc.proto `Compare.CompareResult`).
    pub mod compare_result {
        /// `EQUAL`
        pub const EQUAL: i32 = 0;
        /// `GREATER`
        pub const GREATER: i32 = 1;
        /// `LESS`
        pub const LESS: i32 = 2;
        /// `NOT_EQUAL`
        pub const NOT_EQUAL: i32 = 3;
    }

    /// `Compare.target` values (etcd rpc.proto `Compare.CompareTarget`).
    pub mod compare_target {
        /// `VERSION`
        pub const VERSION: i32 = 0;
        /// `CREATE`
        pub const CREATE: i32 = 1;
        /// `MOD`
        pub const MOD: i32 = 2;
        /// `VALUE`
        pub const VALUE: i32 = 3;
        /// `LEASE`
        pub const LEASE: i32 = 4;
    }

    /// `RangeRequest.sort_order` values.
    pub mod sort_order {
        /// `NONE`
        pub const NONE: i32 = 0;
        /// `ASCEND`
        pub const ASCEND: i32 = 1;
        /// `DESCEND`
        pub const DESCEND: i32 = 2;
    }

    /// `RangeRequest.sort_target` values.
    pub mod sort_target {
        /// `KEY`
        pub const KEY: i32 = 0;
        /// `VERSION`
        pub const VERSION: i32 = 1;
        /// `CREATE`
        pub const CREATE: i32 = 2;
        /// `MOD`
        pub const MOD: i32 = 3;
        /// `VALUE`
        pub const VALUE: i32 = 4;
    }

    /// `WatchCreateRequest.filters` values.
    pub mod filter_type {
        /// `NOPUT`: drop put events.
        pub const NOPUT: i32 = 0;
        /// `NODELETE`: drop delete events.
        pub const NODELETE: i32 = 1;
    }
}

pub mod nested_txn;

/// etcd's `mvccpb` package: key-value pairs and watch events.
pub mod mvccpb {
    pub use etcd_client::proto::{PbEvent as Event, PbKeyValue as KeyValue};

    /// `Event.type` values.
    pub mod event_type {
        /// `PUT`
        pub const PUT: i32 = 0;
        /// `DELETE`
        pub const DELETE: i32 = 1;
    }
}

/// etcd's `v3lockpb` package: the Lock service's messages and its
/// generated server (see `proto/etcd/v3lock.proto`).
#[allow(missing_docs)]
pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
}

/// etcd's `v3electionpb` package: the Election service's messages and its
/// generated server (see `proto/etcd/v3election.proto`).
#[allow(missing_docs)]
pub mod v3electionpb {
    tonic::include_proto!("v3electionpb");
}

/// etcd's `authpb` package: users, roles and key permissions.
pub mod authpb {
    pub use crate::etcd_auth::authpb::{permission, Permission, Role, User, UserAddOptions};
}

/// etcd's Auth service and `authpb`, generated here from
/// `proto/etcd/auth.proto` (see there for why); use them through
/// [`etcdserverpb`] and [`authpb`].
#[allow(missing_docs)]
mod etcd_auth {
    pub mod etcdserverpb {
        tonic::include_proto!("etcdserverpb");
    }
    pub mod authpb {
        tonic::include_proto!("authpb");
    }
}

/// Our internal Raft transport (see `proto/raftpb.proto`).
#[allow(missing_docs)]
pub mod raftpb {
    tonic::include_proto!("raftpb");
}

/// gnostic's `openapi.v2` messages, as far as the apiserver writes them
/// (see `proto/openapiv2.proto`). A document is encoded rarely, so the size
/// of `Parameter`'s body arm does not matter.
#[allow(missing_docs, clippy::large_enum_variant)]
pub mod openapiv2 {
    include!(concat!(env!("OUT_DIR"), "/openapi.v2.rs"));
}
