//! etcd's authentication and authorization (etcd `server/auth`).
//!
//! - [`store`]: users, roles, the enabled flag and the auth revision, kept
//!   in the state machine (the `meta` column family) and changed only by
//!   applying [`AuthCommand`]s from the Raft log; the permission checks.
//! - [`perms`]: a user's key permissions merged into ranges.
//! - [`token`]: the tokens that name a user on each request (etcd's
//!   `--auth-token`: `simple` or `jwt`).
//! - [`command`]: the auth commands and their log encoding.
//!
//! How a request is authorized, as in etcd:
//! 1. The service reads the caller's [`AuthInfo`] from the `token` gRPC
//!    metadata (or the CN of a client certificate under
//!    `--client-cert-auth`); with auth disabled there is none.
//! 2. Reads (Range, read-only Txn, Watch) are checked at once on the member
//!    that serves them.
//! 3. Writes carry the caller's name and auth revision through the log
//!    ([`crate::command::Command::Authed`]), so a follower that forwards a
//!    write keeps the caller's identity, and every member checks the write
//!    against the same auth state when it applies it. A token older than
//!    the last change to users or roles is refused there with
//!    `etcdserver: revision of auth store is old`; clients then
//!    authenticate again.

pub mod command;
pub mod perms;
pub mod store;
pub mod token;

pub use command::{AuthCommand, AuthReply};
pub use store::AuthStore;
pub use token::TokenProvider;

/// The user name of etcd's administrator, which must exist before auth
/// can be enabled.
pub const ROOT_USER: &str = "root";
/// The role that may do everything (etcd `rootRole`).
pub const ROOT_ROLE: &str = "root";

/// Who sent a request (etcd `auth.AuthInfo`): a user name and the auth
/// revision their token was issued at (for simple tokens, the revision
/// when the token was looked up). A revision of 0 means no user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthInfo {
    /// The user name; empty for no user.
    pub username: String,
    /// The auth revision of the token.
    pub revision: u64,
}

pub use proto::authpb::{Permission, Role, User, UserAddOptions};

/// Whether the user was added with `no_password` (it can then sign in only
/// with a client certificate).
pub fn no_password(u: &User) -> bool {
    u.options.as_ref().is_some_and(|o| o.no_password)
}

/// Whether the user has the root role.
pub fn is_root(u: &User) -> bool {
    u.roles.iter().any(|r| r == ROOT_ROLE)
}

/// `authpb.Permission.Type` values.
pub mod perm_type {
    use proto::authpb::permission::Type;

    /// `READ`
    pub const READ: i32 = Type::Read as i32;
    /// `WRITE`
    pub const WRITE: i32 = Type::Write as i32;
    /// `READWRITE`
    pub const READWRITE: i32 = Type::Readwrite as i32;
}
