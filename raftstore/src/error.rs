//! The raftstore error type and its mapping to etcd's gRPC errors.
//!
//! etcd clients (clientv3, kube-apiserver's storage layer) match errors by the
//! exact message string (etcd `api/v3rpc/rpctypes/error.go`), so every variant
//! maps to etcd's code and message in exactly one place: the
//! `From<Error> for tonic::Status` impl below.

use tonic::Code;

/// Result alias for raftstore operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error a raftstore request can fail with.
///
/// Variants that exist in etcd carry etcd's message verbatim in their
/// `Display`; [`Error::code`] gives the gRPC code etcd uses for them.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The requested revision is below the compacted revision.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted,
    /// The requested revision is above the current revision.
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    /// The request is larger than `--max-request-bytes`.
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    /// A txn has more than the maximum number of operations (128).
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// A txn writes the same key twice in one branch.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    /// The lease does not exist.
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// A lease with that ID already exists.
    #[error("etcdserver: lease already exists")]
    LeaseExist,
    /// The lease TTL is above etcd's maximum (9,000,000,000 s).
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    /// A write while the NOSPACE alarm is raised, or one that would take
    /// the database over `--quota-backend-bytes`.
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    /// The request has an empty key.
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    /// `ignore_value`/`ignore_lease` on a key that does not exist.
    #[error("etcdserver: key not found")]
    KeyNotFound,
    /// `ignore_value` together with a value.
    #[error("etcdserver: value is provided")]
    ValueProvided,
    /// `ignore_lease` together with a lease.
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// The member does not exist.
    #[error("etcdserver: member not found")]
    MemberNotFound,
    /// MemberAdd with an ID that is already a member.
    #[error("etcdserver: member ID already exist")]
    MemberExist,
    /// MemberAdd or MemberUpdate with a peer URL another member has.
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExist,
    /// The change would leave fewer started voters than a quorum (etcd's
    /// strict reconfiguration check).
    #[error("etcdserver: re-configuration failed due to not enough started members")]
    MemberNotEnoughStarted,
    /// A peer URL that does not parse.
    #[error("etcdserver: given member URLs are invalid")]
    MemberBadUrls,
    /// MemberPromote of a voting member.
    #[error("etcdserver: can only promote a learner member")]
    MemberNotLearner,
    /// MemberPromote of a learner that lags the leader.
    #[error("etcdserver: can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    /// MemberAdd of a learner beyond etcd's default maximum of one.
    #[error("etcdserver: too many learner members in cluster")]
    TooManyLearners,
    /// A request a learner does not serve (all but Status and serializable
    /// Range).
    #[error("etcdserver: rpc not supported for learner")]
    NotSupportedForLearner,
    /// The cluster has no leader.
    #[error("etcdserver: no leader")]
    NoLeader,
    /// This member is not the leader (etcd `ErrNotLeader`, FailedPrecondition
    /// in etcd's rpctypes; here mostly a signal to retry on the leader).
    #[error("etcdserver: not leader")]
    NotLeader,
    /// The leader changed while the request was in flight.
    #[error("etcdserver: leader changed")]
    LeaderChanged,
    /// MoveLeader to a member that does not exist or is a learner.
    #[error("etcdserver: bad leader transferee")]
    BadLeaderTransferee,
    /// The transferee of a MoveLeader did not become leader in time (etcd
    /// `ErrTimeoutLeaderTransfer`, which etcd's gRPC layer has no code for,
    /// so it reaches clients as Unknown).
    #[error("etcdserver: request timed out, leader transfer took too long")]
    LeaderTransferTimeout,
    /// The request did not complete in time.
    #[error("etcdserver: request timed out")]
    Timeout,
    /// The server is shutting down.
    #[error("etcdserver: server stopped")]
    Stopped,
    /// Too many requests are waiting to be applied.
    #[error("etcdserver: too many requests")]
    TooManyRequests,
    /// auth enable without a user `root`.
    #[error("etcdserver: root user does not exist")]
    RootUserNotExist,
    /// auth enable while user `root` lacks the root role.
    #[error("etcdserver: root user does not have root role")]
    RootRoleNotExist,
    /// UserAdd of an existing user.
    #[error("etcdserver: user name already exists")]
    UserAlreadyExist,
    /// A request with auth enabled and no user (no token), or UserAdd without a name.
    #[error("etcdserver: user name is empty")]
    UserEmpty,
    /// The user does not exist.
    #[error("etcdserver: user name not found")]
    UserNotFound,
    /// RoleAdd of an existing role.
    #[error("etcdserver: role name already exists")]
    RoleAlreadyExist,
    /// The role does not exist.
    #[error("etcdserver: role name not found")]
    RoleNotFound,
    /// RoleAdd without a name.
    #[error("etcdserver: role name is empty")]
    RoleEmpty,
    /// Authenticate with an unknown user or a wrong password.
    #[error("etcdserver: authentication failed, invalid user ID or password")]
    AuthFailed,
    /// RoleGrantPermission without a permission.
    #[error("etcdserver: permission not given")]
    PermissionNotGiven,
    /// The user may not do this.
    #[error("etcdserver: permission denied")]
    PermissionDenied,
    /// UserRevokeRole of a role the user lacks.
    #[error("etcdserver: role is not granted to the user")]
    RoleNotGranted,
    /// RoleRevokePermission of a permission the role lacks.
    #[error("etcdserver: permission is not granted to the role")]
    PermissionNotGranted,
    /// Authenticate while auth is disabled.
    #[error("etcdserver: authentication is not enabled")]
    AuthNotEnabled,
    /// An unknown, expired or forged token.
    #[error("etcdserver: invalid auth token")]
    InvalidAuthToken,
    /// Deleting user or role `root`, revoking root's root role while auth is on, or an invalid permission range.
    #[error("etcdserver: invalid auth management")]
    InvalidAuthMgmt,
    /// A write made with a token issued before the last change to users or roles; clients authenticate again.
    #[error("etcdserver: revision of auth store is old")]
    AuthOldRevision,
    /// Authenticate as a user added with `no_password` (etcd has no gRPC
    /// error for it, so it reaches clients as Unknown with the auth
    /// package's own message).
    #[error("auth: authentication failed, password was given for no password user")]
    NoPasswordUser,
    /// The operation is not implemented by raftstore.
    #[error("{0} is not implemented by raftstore")]
    Unimplemented(&'static str),
    /// A malformed request that etcd rejects with InvalidArgument.
    #[error("{0}")]
    InvalidArgument(String),
    /// Disk or internal failure. The message is for operators.
    #[error("etcdserver: {0}")]
    Internal(String),
}

impl Error {
    /// The gRPC status code etcd uses for this error.
    pub fn code(&self) -> Code {
        match self {
            Error::Compacted | Error::FutureRevision | Error::LeaseTtlTooLarge => Code::OutOfRange,
            Error::RequestTooLarge | Error::TooManyOps | Error::DuplicateKey | Error::EmptyKey | Error::KeyNotFound | Error::ValueProvided | Error::LeaseProvided | Error::InvalidArgument(_) => {
                Code::InvalidArgument
            }
            Error::LeaseNotFound | Error::MemberNotFound => Code::NotFound,
            Error::LeaseExist
            | Error::MemberExist
            | Error::PeerUrlExist
            | Error::MemberNotEnoughStarted
            | Error::MemberNotLearner
            | Error::LearnerNotReady
            | Error::TooManyLearners
            | Error::NotLeader
            | Error::BadLeaderTransferee => Code::FailedPrecondition,
            Error::MemberBadUrls => Code::InvalidArgument,
            Error::NoLeader | Error::LeaderChanged | Error::Timeout | Error::Stopped | Error::NotSupportedForLearner => Code::Unavailable,
            Error::TooManyRequests | Error::NoSpace => Code::ResourceExhausted,
            Error::RootUserNotExist
            | Error::RootRoleNotExist
            | Error::UserAlreadyExist
            | Error::UserNotFound
            | Error::RoleAlreadyExist
            | Error::RoleNotFound
            | Error::RoleNotGranted
            | Error::PermissionNotGranted
            | Error::AuthNotEnabled => Code::FailedPrecondition,
            Error::UserEmpty | Error::RoleEmpty | Error::AuthFailed | Error::PermissionNotGiven | Error::InvalidAuthMgmt | Error::AuthOldRevision => Code::InvalidArgument,
            Error::PermissionDenied => Code::PermissionDenied,
            Error::InvalidAuthToken => Code::Unauthenticated,
            Error::NoPasswordUser => Code::Unknown,
            Error::Unimplemented(_) => Code::Unimplemented,
            Error::LeaderTransferTimeout => Code::Unknown,
            Error::Internal(_) => Code::Internal,
        }
    }

    /// Builds an [`Error::Internal`] from any displayable error (RocksDB, I/O).
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Error::Internal(e.to_string())
    }

    /// Reconstructs an error from its gRPC code and message, as received from
    /// another member when a request was forwarded.
    pub fn from_code_message(code: i32, message: &str) -> Self {
        let all = [
            Error::Compacted,
            Error::FutureRevision,
            Error::RequestTooLarge,
            Error::TooManyOps,
            Error::DuplicateKey,
            Error::LeaseNotFound,
            Error::LeaseExist,
            Error::LeaseTtlTooLarge,
            Error::EmptyKey,
            Error::KeyNotFound,
            Error::ValueProvided,
            Error::LeaseProvided,
            Error::MemberNotFound,
            Error::MemberExist,
            Error::PeerUrlExist,
            Error::MemberNotEnoughStarted,
            Error::MemberBadUrls,
            Error::MemberNotLearner,
            Error::LearnerNotReady,
            Error::TooManyLearners,
            Error::NotSupportedForLearner,
            Error::NoLeader,
            Error::NotLeader,
            Error::LeaderChanged,
            Error::BadLeaderTransferee,
            Error::LeaderTransferTimeout,
            Error::Timeout,
            Error::Stopped,
            Error::TooManyRequests,
            Error::NoSpace,
            Error::RootUserNotExist,
            Error::RootRoleNotExist,
            Error::UserAlreadyExist,
            Error::UserEmpty,
            Error::UserNotFound,
            Error::RoleAlreadyExist,
            Error::RoleNotFound,
            Error::RoleEmpty,
            Error::AuthFailed,
            Error::PermissionNotGiven,
            Error::PermissionDenied,
            Error::RoleNotGranted,
            Error::PermissionNotGranted,
            Error::AuthNotEnabled,
            Error::InvalidAuthToken,
            Error::InvalidAuthMgmt,
            Error::AuthOldRevision,
            Error::NoPasswordUser,
        ];
        if let Some(e) = all.into_iter().find(|e| e.to_string() == message) {
            return e;
        }
        match Code::from_i32(code) {
            Code::InvalidArgument => Error::InvalidArgument(message.to_string()),
            _ => Error::Internal(message.trim_start_matches("etcdserver: ").to_string()),
        }
    }
}

impl Error {
    /// The status etcd 3.4's Maintenance service answers an auth error
    /// with: it passes the auth package's own error through unconverted,
    /// so clients see code Unknown and `auth: ...` instead of
    /// `etcdserver: ...` (for example `auth: user name is empty`; a missing
    /// user is `auth: user not found`).
    pub fn unconverted_auth_status(&self) -> tonic::Status {
        let msg = match self {
            Error::UserNotFound => "auth: user not found".to_string(),
            Error::InvalidAuthToken | Error::UserEmpty | Error::PermissionDenied => format!("auth: {}", self.to_string().trim_start_matches("etcdserver: ")),
            other => return tonic::Status::from(other.clone()),
        };
        tonic::Status::unknown(msg)
    }
}

impl From<rocksdb::Error> for Error {
    fn from(e: rocksdb::Error) -> Self {
        Error::internal(e)
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        tonic::Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every etcd error maps to etcd's exact code and message
    /// (etcd api/v3rpc/rpctypes/error.go).
    #[test]
    fn every_variant_maps_to_etcd_code_and_message() {
        let cases: Vec<(Error, Code, &str)> = vec![
            (Error::Compacted, Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted"),
            (Error::FutureRevision, Code::OutOfRange, "etcdserver: mvcc: required revision is a future revision"),
            (Error::RequestTooLarge, Code::InvalidArgument, "etcdserver: request is too large"),
            (Error::TooManyOps, Code::InvalidArgument, "etcdserver: too many operations in txn request"),
            (Error::NoSpace, Code::ResourceExhausted, "etcdserver: mvcc: database space exceeded"),
            (Error::DuplicateKey, Code::InvalidArgument, "etcdserver: duplicate key given in txn request"),
            (Error::LeaseNotFound, Code::NotFound, "etcdserver: requested lease not found"),
            (Error::LeaseExist, Code::FailedPrecondition, "etcdserver: lease already exists"),
            (Error::LeaseTtlTooLarge, Code::OutOfRange, "etcdserver: too large lease TTL"),
            (Error::EmptyKey, Code::InvalidArgument, "etcdserver: key is not provided"),
            (Error::KeyNotFound, Code::InvalidArgument, "etcdserver: key not found"),
            (Error::ValueProvided, Code::InvalidArgument, "etcdserver: value is provided"),
            (Error::LeaseProvided, Code::InvalidArgument, "etcdserver: lease is provided"),
            (Error::MemberNotFound, Code::NotFound, "etcdserver: member not found"),
            (Error::MemberExist, Code::FailedPrecondition, "etcdserver: member ID already exist"),
            (Error::PeerUrlExist, Code::FailedPrecondition, "etcdserver: Peer URLs already exists"),
            (Error::MemberNotEnoughStarted, Code::FailedPrecondition, "etcdserver: re-configuration failed due to not enough started members"),
            (Error::MemberBadUrls, Code::InvalidArgument, "etcdserver: given member URLs are invalid"),
            (Error::MemberNotLearner, Code::FailedPrecondition, "etcdserver: can only promote a learner member"),
            (Error::LearnerNotReady, Code::FailedPrecondition, "etcdserver: can only promote a learner member which is in sync with leader"),
            (Error::TooManyLearners, Code::FailedPrecondition, "etcdserver: too many learner members in cluster"),
            (Error::NotSupportedForLearner, Code::Unavailable, "etcdserver: rpc not supported for learner"),
            (Error::NoLeader, Code::Unavailable, "etcdserver: no leader"),
            (Error::NotLeader, Code::FailedPrecondition, "etcdserver: not leader"),
            (Error::LeaderChanged, Code::Unavailable, "etcdserver: leader changed"),
            (Error::BadLeaderTransferee, Code::FailedPrecondition, "etcdserver: bad leader transferee"),
            (Error::LeaderTransferTimeout, Code::Unknown, "etcdserver: request timed out, leader transfer took too long"),
            (Error::Timeout, Code::Unavailable, "etcdserver: request timed out"),
            (Error::Stopped, Code::Unavailable, "etcdserver: server stopped"),
            (Error::TooManyRequests, Code::ResourceExhausted, "etcdserver: too many requests"),
            (Error::RootUserNotExist, Code::FailedPrecondition, "etcdserver: root user does not exist"),
            (Error::RootRoleNotExist, Code::FailedPrecondition, "etcdserver: root user does not have root role"),
            (Error::UserAlreadyExist, Code::FailedPrecondition, "etcdserver: user name already exists"),
            (Error::UserEmpty, Code::InvalidArgument, "etcdserver: user name is empty"),
            (Error::UserNotFound, Code::FailedPrecondition, "etcdserver: user name not found"),
            (Error::RoleAlreadyExist, Code::FailedPrecondition, "etcdserver: role name already exists"),
            (Error::RoleNotFound, Code::FailedPrecondition, "etcdserver: role name not found"),
            (Error::RoleEmpty, Code::InvalidArgument, "etcdserver: role name is empty"),
            (Error::AuthFailed, Code::InvalidArgument, "etcdserver: authentication failed, invalid user ID or password"),
            (Error::PermissionNotGiven, Code::InvalidArgument, "etcdserver: permission not given"),
            (Error::PermissionDenied, Code::PermissionDenied, "etcdserver: permission denied"),
            (Error::RoleNotGranted, Code::FailedPrecondition, "etcdserver: role is not granted to the user"),
            (Error::PermissionNotGranted, Code::FailedPrecondition, "etcdserver: permission is not granted to the role"),
            (Error::AuthNotEnabled, Code::FailedPrecondition, "etcdserver: authentication is not enabled"),
            (Error::InvalidAuthToken, Code::Unauthenticated, "etcdserver: invalid auth token"),
            (Error::InvalidAuthMgmt, Code::InvalidArgument, "etcdserver: invalid auth management"),
            (Error::AuthOldRevision, Code::InvalidArgument, "etcdserver: revision of auth store is old"),
            (Error::NoPasswordUser, Code::Unknown, "auth: authentication failed, password was given for no password user"),
        ];
        for (err, code, msg) in cases {
            let status: tonic::Status = err.clone().into();
            assert_eq!(status.code(), code, "{err:?}");
            assert_eq!(status.message(), msg, "{err:?}");
            assert_eq!(Error::from_code_message(code as i32, msg), err);
        }
    }
}
