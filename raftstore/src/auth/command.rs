//! Auth changes replicated through the Raft log (etcd's `InternalRaftRequest`
//! auth fields), and the identity a client write carries through the log.
//!
//! On the wire an [`AuthCommand`] is one sub-tag byte followed by the
//! protobuf of etcd's request message. Passwords never enter the log: the
//! member that takes a `UserAdd` or `UserChangePassword` hashes the password
//! first and sends only the hash (etcd 3.5's `hashedPassword`), and
//! `Authenticate` carries no password at all (it was checked before).

use prost::Message;
use proto::etcdserverpb::{
    AuthRoleAddRequest, AuthRoleDeleteRequest, AuthRoleGrantPermissionRequest, AuthRoleRevokePermissionRequest, AuthUserAddRequest, AuthUserChangePasswordRequest, AuthUserDeleteRequest,
    AuthUserGrantRoleRequest, AuthUserRevokeRoleRequest,
};

use crate::error::{Error, Result};

/// One auth change, applied by every member in log order.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthCommand {
    /// etcd `Auth.AuthEnable`.
    Enable,
    /// etcd `Auth.AuthDisable`.
    Disable,
    /// Issue a token to a user whose password was checked (etcd's
    /// `InternalAuthenticateRequest`).
    Authenticate(InternalAuthenticate),
    /// etcd `Auth.UserAdd`, with the password already hashed.
    UserAdd(AuthUserAddRequest),
    /// etcd `Auth.UserDelete`.
    UserDelete(AuthUserDeleteRequest),
    /// etcd `Auth.UserChangePassword`, with the password already hashed.
    UserChangePassword(AuthUserChangePasswordRequest),
    /// etcd `Auth.UserGrantRole`.
    UserGrantRole(AuthUserGrantRoleRequest),
    /// etcd `Auth.UserRevokeRole`.
    UserRevokeRole(AuthUserRevokeRoleRequest),
    /// etcd `Auth.RoleAdd`.
    RoleAdd(AuthRoleAddRequest),
    /// etcd `Auth.RoleDelete`.
    RoleDelete(AuthRoleDeleteRequest),
    /// etcd `Auth.RoleGrantPermission`.
    RoleGrantPermission(AuthRoleGrantPermissionRequest),
    /// etcd `Auth.RoleRevokePermission`.
    RoleRevokePermission(AuthRoleRevokePermissionRequest),
}

/// etcd's `InternalAuthenticateRequest` (same field numbers; the password
/// field is never set).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct InternalAuthenticate {
    /// The user name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The random prefix of a simple token; empty for JWT.
    #[prost(string, tag = "3")]
    pub simple_token: String,
}

/// The identity a client write carries through the log: the fields of
/// etcd's `RequestHeader` that name the caller.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct AuthHeader {
    /// The caller's user name; empty for none.
    #[prost(string, tag = "2")]
    pub username: String,
    /// The auth revision of the caller's token; 0 for none.
    #[prost(uint64, tag = "3")]
    pub auth_revision: u64,
}

/// What applying an [`AuthCommand`] returns: the token for `Authenticate`,
/// empty for the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthReply {
    /// The issued token.
    pub token: String,
}

const ENABLE: u8 = 1;
const DISABLE: u8 = 2;
const AUTHENTICATE: u8 = 3;
const USER_ADD: u8 = 4;
const USER_DELETE: u8 = 5;
const USER_CHANGE_PASSWORD: u8 = 6;
const USER_GRANT_ROLE: u8 = 7;
const USER_REVOKE_ROLE: u8 = 8;
const ROLE_ADD: u8 = 9;
const ROLE_DELETE: u8 = 10;
const ROLE_GRANT_PERMISSION: u8 = 11;
const ROLE_REVOKE_PERMISSION: u8 = 12;

fn tagged(tag: u8, m: &impl Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + m.encoded_len());
    out.push(tag);
    // Encoding into a Vec cannot run out of space.
    let _ = m.encode(&mut out);
    out
}

fn de<M: Message + Default>(b: &[u8]) -> Result<M> {
    M::decode(b).map_err(|e| Error::internal(format!("corrupt auth command: {e}")))
}

impl AuthCommand {
    /// Sub-tag byte + protobuf bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            AuthCommand::Enable => vec![ENABLE],
            AuthCommand::Disable => vec![DISABLE],
            AuthCommand::Authenticate(r) => tagged(AUTHENTICATE, r),
            AuthCommand::UserAdd(r) => tagged(USER_ADD, r),
            AuthCommand::UserDelete(r) => tagged(USER_DELETE, r),
            AuthCommand::UserChangePassword(r) => tagged(USER_CHANGE_PASSWORD, r),
            AuthCommand::UserGrantRole(r) => tagged(USER_GRANT_ROLE, r),
            AuthCommand::UserRevokeRole(r) => tagged(USER_REVOKE_ROLE, r),
            AuthCommand::RoleAdd(r) => tagged(ROLE_ADD, r),
            AuthCommand::RoleDelete(r) => tagged(ROLE_DELETE, r),
            AuthCommand::RoleGrantPermission(r) => tagged(ROLE_GRANT_PERMISSION, r),
            AuthCommand::RoleRevokePermission(r) => tagged(ROLE_REVOKE_PERMISSION, r),
        }
    }

    /// Inverse of [`AuthCommand::encode`].
    ///
    /// # Errors
    /// [`Error::Internal`] on an unknown sub-tag or malformed protobuf.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let (tag, rest) = b.split_first().ok_or_else(|| Error::internal("empty auth command"))?;
        Ok(match *tag {
            ENABLE => AuthCommand::Enable,
            DISABLE => AuthCommand::Disable,
            AUTHENTICATE => AuthCommand::Authenticate(de(rest)?),
            USER_ADD => AuthCommand::UserAdd(de(rest)?),
            USER_DELETE => AuthCommand::UserDelete(de(rest)?),
            USER_CHANGE_PASSWORD => AuthCommand::UserChangePassword(de(rest)?),
            USER_GRANT_ROLE => AuthCommand::UserGrantRole(de(rest)?),
            USER_REVOKE_ROLE => AuthCommand::UserRevokeRole(de(rest)?),
            ROLE_ADD => AuthCommand::RoleAdd(de(rest)?),
            ROLE_DELETE => AuthCommand::RoleDelete(de(rest)?),
            ROLE_GRANT_PERMISSION => AuthCommand::RoleGrantPermission(de(rest)?),
            ROLE_REVOKE_PERMISSION => AuthCommand::RoleRevokePermission(de(rest)?),
            other => return Err(Error::internal(format!("unknown auth command tag {other}"))),
        })
    }

    /// Whether only a root user may make this change (etcd
    /// `needAdminPermission`).
    pub fn needs_admin(&self) -> bool {
        !matches!(self, AuthCommand::Authenticate(_))
    }
}

/// Encodes an identity and the command it wraps: the header's length as
/// a protobuf varint, the header, then the command's bytes.
pub fn encode_authed(header: &AuthHeader, inner: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + header.encoded_len() + inner.len());
    // Encoding into a Vec cannot run out of space.
    let _ = header.encode_length_delimited(&mut out);
    out.extend_from_slice(inner);
    out
}

/// Inverse of [`encode_authed`]: the header and the wrapped command's bytes.
///
/// # Errors
/// [`Error::Internal`] on a malformed header.
pub fn decode_authed(mut b: &[u8]) -> Result<(AuthHeader, &[u8])> {
    let header = AuthHeader::decode_length_delimited(&mut b).map_err(|e| Error::internal(format!("corrupt auth header: {e}")))?;
    Ok((header, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_commands_round_trip() {
        let cmds = vec![
            AuthCommand::Enable,
            AuthCommand::Disable,
            AuthCommand::Authenticate(InternalAuthenticate { name: "u".into(), simple_token: "abc".into() }),
            AuthCommand::UserAdd(AuthUserAddRequest { name: "u".into(), hashed_password: "h".into(), ..Default::default() }),
            AuthCommand::RoleAdd(AuthRoleAddRequest { name: "r".into() }),
            AuthCommand::RoleRevokePermission(AuthRoleRevokePermissionRequest { role: "r".into(), key: b"k".to_vec(), range_end: b"l".to_vec() }),
        ];
        for c in cmds {
            assert_eq!(AuthCommand::decode(&c.encode()).ok(), Some(c));
        }
        assert!(AuthCommand::decode(&[]).is_err());
        assert!(AuthCommand::decode(&[99]).is_err());
        let h = AuthHeader { username: "alice".into(), auth_revision: 7 };
        let bytes = encode_authed(&h, b"rest");
        assert_eq!(decode_authed(&bytes).ok(), Some((h, &b"rest"[..])));
        assert!(decode_authed(&[0xff]).is_err());
    }
}
