//! The auth state (etcd `auth/store.go`): users, roles, whether auth is
//! enabled, and the auth revision, with the permission checks.
//!
//! The state lives in the `meta` column family (keys in
//! [`crate::storage::keys`]) and changes only when the state machine applies
//! an [`AuthCommand`], in the same RocksDB batch as the applied log id, so
//! every member holds the same state at the same log index, and snapshots
//! and restarts keep it. A copy sits in memory for the checks.
//!
//! The auth revision starts at 1 and goes up by one with every change to
//! users, roles or permissions and with `AuthDisable` (not with
//! `AuthEnable`, nor with a change refused), as etcd's does; tokens carry
//! it so a write made with a token older than the last change is refused.

use std::collections::{BTreeMap, HashMap};

use parking_lot::RwLock;
use prost::Message;
use proto::etcdserverpb::{RequestOpRequest, TxnRequest};
use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::command::{AuthCommand, AuthReply};
use super::perms::{is_valid_range, Access, UserPerms};
use super::token::TokenProvider;
use super::{is_root, no_password, AuthInfo, Permission, Role, User, UserAddOptions, ROOT_ROLE, ROOT_USER};
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};
use crate::storage::keys::{self, MetaKey};
use crate::storage::{cf, Db};

/// In-memory copy of the persisted state.
#[derive(Debug, Clone)]
struct State {
    enabled: bool,
    revision: u64,
    users: BTreeMap<String, User>,
    roles: BTreeMap<String, Role>,
    /// Merged permissions per user, rebuilt on every change (etcd's
    /// `rangePermCache`).
    perms: HashMap<String, UserPerms>,
}

impl State {
    fn refresh_perms(&mut self) {
        let roles = &self.roles;
        self.perms = self.users.iter().map(|(name, u)| (name.clone(), UserPerms::build(u, |r| roles.get(r)))).collect();
    }
}

/// The auth store of one member.
pub struct AuthStore {
    db: Db,
    state: RwLock<State>,
    tokens: TokenProvider,
    bcrypt_cost: u32,
}

/// etcd's default `--bcrypt-cost`.
pub const DEFAULT_BCRYPT_COST: u32 = 10;

fn corrupt(what: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("corrupt auth {what}: {e}"))
}

fn load(db: &Db) -> Result<State> {
    let meta = cf(db, keys::CF_META)?;
    let enabled = db.get_cf(meta, keys::AuthEnabled::KEY)?.is_some_and(|v| v.as_slice() == [1]);
    let revision = match db.get_cf(meta, keys::AuthRevision::KEY)? {
        Some(v) => keys::decode_u64(&v)?,
        None => 1,
    };
    let mut users = BTreeMap::new();
    for item in db.iterator_cf(meta, IteratorMode::From(keys::AUTH_USER_PREFIX, Direction::Forward)) {
        let (k, v) = item?;
        if !k.starts_with(keys::AUTH_USER_PREFIX) {
            break;
        }
        let u = User::decode(v.as_ref()).map_err(|e| corrupt("user", e))?;
        users.insert(String::from_utf8_lossy(&u.name).into_owned(), u);
    }
    let mut roles = BTreeMap::new();
    for item in db.iterator_cf(meta, IteratorMode::From(keys::AUTH_ROLE_PREFIX, Direction::Forward)) {
        let (k, v) = item?;
        if !k.starts_with(keys::AUTH_ROLE_PREFIX) {
            break;
        }
        let r = Role::decode(v.as_ref()).map_err(|e| corrupt("role", e))?;
        roles.insert(String::from_utf8_lossy(&r.name).into_owned(), r);
    }
    let mut st = State { enabled, revision, users, roles, perms: HashMap::new() };
    st.refresh_perms();
    Ok(st)
}

/// Staged changes of one command: the new state and the writes.
struct Change<'a> {
    st: State,
    batch: &'a mut WriteBatch,
    meta: &'a rocksdb::ColumnFamily,
}

impl Change<'_> {
    fn put_user(&mut self, u: User) {
        self.batch.put_cf(self.meta, keys::auth_user_key(&u.name), u.encode_to_vec());
        self.st.users.insert(String::from_utf8_lossy(&u.name).into_owned(), u);
    }

    fn put_role(&mut self, r: Role) {
        self.batch.put_cf(self.meta, keys::auth_role_key(&r.name), r.encode_to_vec());
        self.st.roles.insert(String::from_utf8_lossy(&r.name).into_owned(), r);
    }

    /// etcd `commitRevision`.
    fn bump(&mut self) {
        self.st.revision += 1;
        self.batch.put_cf(self.meta, keys::AuthRevision::KEY, self.st.revision.to_be_bytes());
    }

    fn user(&self, name: &str) -> Result<User> {
        self.st.users.get(name).cloned().ok_or(Error::UserNotFound)
    }
}

/// The stored form of a password: etcd 3.5 sends the base64 of the bcrypt
/// hash; a request with only a plain password (from a 3.4 member's log) is
/// hashed here.
fn stored_password(plain: &str, hashed: &str, cost: u32) -> Result<Vec<u8>> {
    use base64::Engine as _;
    if hashed.is_empty() && !plain.is_empty() {
        return bcrypt::hash(plain, cost).map(String::into_bytes).map_err(Error::internal);
    }
    base64::engine::general_purpose::STANDARD.decode(hashed).map_err(|_| Error::NoPasswordUser)
}

impl AuthStore {
    /// Loads the auth state from `db`'s `meta` column family, issuing
    /// tokens with `tokens` and hashing passwords at `bcrypt_cost`
    /// (etcd's `--bcrypt-cost`, 4..=31; out of range: the default 10).
    ///
    /// # Errors
    /// [`Error::Internal`] on unreadable or corrupt data.
    pub fn open(db: Db, tokens: TokenProvider, bcrypt_cost: u32) -> Result<Self> {
        let st = load(&db)?;
        let bcrypt_cost = if (4..=31).contains(&bcrypt_cost) { bcrypt_cost } else { DEFAULT_BCRYPT_COST };
        Ok(AuthStore { db, state: RwLock::new(st), tokens, bcrypt_cost })
    }

    /// Reloads the state after a snapshot replaced the column families.
    /// Simple tokens are dropped (they named log entries of the old
    /// history).
    ///
    /// # Errors
    /// [`Error::Internal`] on unreadable or corrupt data.
    pub fn reload(&self) -> Result<()> {
        let st = load(&self.db)?;
        *self.state.write() = st;
        self.tokens.clear();
        Ok(())
    }

    /// Whether auth is enabled.
    pub fn enabled(&self) -> bool {
        self.state.read().enabled
    }

    /// The auth revision.
    pub fn revision(&self) -> u64 {
        self.state.read().revision
    }

    /// This member's token provider.
    pub fn tokens(&self) -> &TokenProvider {
        &self.tokens
    }

    /// The bcrypt cost passwords are hashed at.
    pub fn bcrypt_cost(&self) -> u32 {
        self.bcrypt_cost
    }

    /// The caller named by `token` (etcd `AuthInfoFromCtx`), or `None`
    /// when auth is disabled.
    ///
    /// # Errors
    /// [`Error::InvalidAuthToken`] for an unknown, lapsed or forged token.
    pub fn token_info(&self, token: &str) -> Result<Option<AuthInfo>> {
        if !self.enabled() {
            return Ok(None);
        }
        match self.tokens.lookup(token) {
            Some((username, Some(revision))) => Ok(Some(AuthInfo { username, revision })),
            Some((username, None)) => Ok(Some(AuthInfo { username, revision: self.revision() })),
            None => Err(Error::InvalidAuthToken),
        }
    }

    /// Checks a password (etcd `CheckPassword`); returns the auth revision
    /// it was checked at. Takes a bcrypt verification (tens of ms): call it
    /// off the async threads.
    ///
    /// # Errors
    /// [`Error::AuthNotEnabled`]; [`Error::AuthFailed`] for an unknown user
    /// or a wrong password; [`Error::NoPasswordUser`] for a user without
    /// one.
    pub fn check_password(&self, name: &str, password: &str) -> Result<u64> {
        let (hash, revision) = {
            let st = self.state.read();
            if !st.enabled {
                return Err(Error::AuthNotEnabled);
            }
            let u = st.users.get(name).ok_or(Error::AuthFailed)?;
            if no_password(u) {
                return Err(Error::NoPasswordUser);
            }
            (String::from_utf8_lossy(&u.password).into_owned(), st.revision)
        };
        match bcrypt::verify(password, &hash) {
            Ok(true) => Ok(revision),
            _ => Err(Error::AuthFailed),
        }
    }

    /// Hashes a password for a `UserAdd` or `UserChangePassword` before it
    /// is proposed: the base64 of the bcrypt hash (etcd 3.5's
    /// `hashedPassword`). Slow by design; call it off the async threads.
    ///
    /// # Errors
    /// [`Error::Internal`] if hashing fails.
    pub fn hash_password(&self, password: &str) -> Result<String> {
        use base64::Engine as _;
        let h = bcrypt::hash(password, self.bcrypt_cost).map_err(Error::internal)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(h))
    }

    /// The roles of a user (etcd `UserGet`).
    ///
    /// # Errors
    /// [`Error::UserNotFound`].
    pub fn user_roles(&self, name: &str) -> Result<Vec<String>> {
        self.state.read().users.get(name).map(|u| u.roles.clone()).ok_or(Error::UserNotFound)
    }

    /// Every user name, sorted.
    pub fn user_names(&self) -> Vec<String> {
        self.state.read().users.keys().cloned().collect()
    }

    /// Every role name, sorted.
    pub fn role_names(&self) -> Vec<String> {
        self.state.read().roles.keys().cloned().collect()
    }

    /// The permissions of a role (etcd 3.4's `RoleGet`: the root role lists
    /// none of its own).
    ///
    /// # Errors
    /// [`Error::RoleNotFound`].
    pub fn role_perms(&self, role: &str) -> Result<Vec<Permission>> {
        self.state.read().roles.get(role).map(|r| r.key_permission.clone()).ok_or(Error::RoleNotFound)
    }

    /// Whether `user` exists and has `role`.
    pub fn has_role(&self, user: &str, role: &str) -> bool {
        self.state.read().users.get(user).is_some_and(|u| u.roles.iter().any(|r| r == role))
    }

    /// etcd `IsAdminPermitted`: with auth enabled, the caller must be a
    /// user with the root role.
    ///
    /// # Errors
    /// [`Error::UserEmpty`] without a caller; [`Error::UserNotFound`];
    /// [`Error::PermissionDenied`] without the root role.
    pub fn check_admin(&self, info: Option<&AuthInfo>) -> Result<()> {
        let st = self.state.read();
        if !st.enabled {
            return Ok(());
        }
        let Some(info) = info.filter(|i| !i.username.is_empty()) else { return Err(Error::UserEmpty) };
        let u = st.users.get(&info.username).ok_or(Error::UserNotFound)?;
        if is_root(u) {
            Ok(())
        } else {
            Err(Error::PermissionDenied)
        }
    }

    /// etcd `isOpPermitted`: with auth enabled, the caller may `access`
    /// `key` (`range_end` empty) or `[key, range_end)`.
    ///
    /// # Errors
    /// [`Error::UserEmpty`] without a caller; [`Error::AuthOldRevision`]
    /// for a token older than the auth revision; [`Error::PermissionDenied`].
    pub fn check_key(&self, info: Option<&AuthInfo>, access: Access, key: &[u8], range_end: &[u8]) -> Result<()> {
        let st = self.state.read();
        check_key(&st, info, access, key, range_end)
    }

    /// etcd `CheckTxnAuth`: every compare needs read access, every range
    /// read, every put and delete write (and read with `prev_kv`), nested
    /// txns likewise.
    ///
    /// # Errors
    /// As [`AuthStore::check_key`].
    pub fn check_txn(&self, info: Option<&AuthInfo>, t: &TxnRequest, lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>) -> Result<()> {
        let st = self.state.read();
        check_txn(&st, info, t, lease_keys)
    }

    /// The apply-time check of a write made by `info` (etcd's
    /// `authApplierV3`); `lease_keys` gives the keys attached to a lease.
    ///
    /// # Errors
    /// As [`AuthStore::check_key`] and [`AuthStore::check_admin`].
    pub fn check_command(&self, info: &AuthInfo, cmd: &Command, lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>) -> Result<()> {
        let st = self.state.read();
        if !st.enabled {
            return Ok(());
        }
        let info = Some(info);
        match cmd {
            Command::Put(p) => check_put(&st, info, p, lease_keys),
            Command::DeleteRange(d) => {
                check_key(&st, info, Access::Write, &d.key, &d.range_end)?;
                if d.prev_kv {
                    check_key(&st, info, Access::Read, &d.key, &d.range_end)?;
                }
                Ok(())
            }
            Command::Txn(t) => check_txn(&st, info, t, lease_keys),
            Command::LeaseRevoke(r) => check_lease_keys(&st, info, &lease_keys(r.id)),
            Command::Auth(a) if a.needs_admin() => {
                drop(st);
                self.check_admin(info)
            }
            _ => Ok(()),
        }
    }

    /// Applies one auth command (etcd's auth applier): the change and
    /// `extra` (the applied log id) are written in one batch, then the
    /// in-memory state follows. `index` is the entry's log index (it names
    /// a simple token).
    ///
    /// A refused change (e.g. an unknown user) becomes
    /// [`CommandResponse::Error`] and changes nothing but `extra`.
    ///
    /// # Errors
    /// [`Error::Internal`] if the write to disk fails.
    pub fn apply(&self, cmd: &AuthCommand, index: u64, extra: impl FnOnce(&mut WriteBatch) -> Result<()>) -> Result<CommandResponse> {
        let meta = cf(&self.db, keys::CF_META)?;
        let mut batch = WriteBatch::default();
        let st = self.state.read().clone();
        let mut ch = Change { st, batch: &mut batch, meta };
        let res = self.change(&mut ch, cmd, index);
        let Change { mut st, .. } = ch;
        let resp = match res {
            Ok(reply) => {
                st.refresh_perms();
                CommandResponse::Auth(reply)
            }
            Err(e @ Error::Internal(_)) => return Err(e),
            Err(e) => {
                batch = WriteBatch::default();
                st = self.state.read().clone();
                CommandResponse::Error(e)
            }
        };
        extra(&mut batch)?;
        self.db.write(batch)?;
        *self.state.write() = st;
        // Token changes follow the state they depend on.
        match (cmd, &resp) {
            (AuthCommand::Disable, CommandResponse::Auth(_)) => self.tokens.clear(),
            (AuthCommand::UserDelete(r), CommandResponse::Auth(_)) => self.tokens.invalidate_user(&r.name),
            (AuthCommand::UserChangePassword(r), CommandResponse::Auth(_)) => self.tokens.invalidate_user(&r.name),
            _ => {}
        }
        Ok(resp)
    }

    fn change(&self, ch: &mut Change<'_>, cmd: &AuthCommand, index: u64) -> Result<AuthReply> {
        match cmd {
            AuthCommand::Enable => {
                if ch.st.enabled {
                    return Ok(AuthReply::default());
                }
                let root = ch.st.users.get(ROOT_USER).ok_or(Error::RootUserNotExist)?;
                if !is_root(root) {
                    return Err(Error::RootRoleNotExist);
                }
                ch.st.enabled = true;
                ch.batch.put_cf(ch.meta, keys::AuthEnabled::KEY, [1u8]);
            }
            AuthCommand::Disable => {
                if !ch.st.enabled {
                    return Ok(AuthReply::default());
                }
                ch.st.enabled = false;
                ch.batch.put_cf(ch.meta, keys::AuthEnabled::KEY, [0u8]);
                ch.bump();
            }
            AuthCommand::Authenticate(r) => {
                if !ch.st.enabled {
                    return Err(Error::AuthNotEnabled);
                }
                let u = ch.st.users.get(&r.name).ok_or(Error::AuthFailed)?;
                if no_password(u) {
                    return Err(Error::AuthFailed);
                }
                let token = self.tokens.assign(&r.name, ch.st.revision, &r.simple_token, index)?;
                return Ok(AuthReply { token });
            }
            AuthCommand::UserAdd(r) => {
                if r.name.is_empty() {
                    return Err(Error::UserEmpty);
                }
                if ch.st.users.contains_key(&r.name) {
                    return Err(Error::UserAlreadyExist);
                }
                let options = r.options.unwrap_or(UserAddOptions { no_password: false });
                let password = if options.no_password { Vec::new() } else { stored_password(&r.password, &r.hashed_password, self.bcrypt_cost)? };
                ch.put_user(User { name: r.name.clone().into_bytes(), password, roles: Vec::new(), options: Some(options) });
                ch.bump();
            }
            AuthCommand::UserDelete(r) => {
                if ch.st.enabled && r.name == ROOT_USER {
                    return Err(Error::InvalidAuthMgmt);
                }
                let u = ch.user(&r.name)?;
                ch.batch.delete_cf(ch.meta, keys::auth_user_key(&u.name));
                ch.st.users.remove(&r.name);
                ch.bump();
            }
            AuthCommand::UserChangePassword(r) => {
                let mut u = ch.user(&r.name)?;
                u.password = if no_password(&u) { Vec::new() } else { stored_password(&r.password, &r.hashed_password, self.bcrypt_cost)? };
                ch.put_user(u);
                ch.bump();
            }
            AuthCommand::UserGrantRole(r) => {
                let mut u = ch.user(&r.user)?;
                if r.role != ROOT_ROLE && !ch.st.roles.contains_key(&r.role) {
                    return Err(Error::RoleNotFound);
                }
                // Granting a role twice changes nothing (etcd logs and
                // answers OK).
                if let Err(at) = u.roles.binary_search(&r.role) {
                    u.roles.insert(at, r.role.clone());
                    ch.put_user(u);
                    ch.bump();
                }
            }
            AuthCommand::UserRevokeRole(r) => {
                if ch.st.enabled && r.name == ROOT_USER && r.role == ROOT_ROLE {
                    return Err(Error::InvalidAuthMgmt);
                }
                let mut u = ch.user(&r.name)?;
                let before = u.roles.len();
                u.roles.retain(|x| *x != r.role);
                if u.roles.len() == before {
                    return Err(Error::RoleNotGranted);
                }
                ch.put_user(u);
                ch.bump();
            }
            AuthCommand::RoleAdd(r) => {
                if r.name.is_empty() {
                    return Err(Error::RoleEmpty);
                }
                if ch.st.roles.contains_key(&r.name) {
                    return Err(Error::RoleAlreadyExist);
                }
                ch.put_role(Role { name: r.name.clone().into_bytes(), key_permission: Vec::new() });
                ch.bump();
            }
            AuthCommand::RoleDelete(r) => {
                if ch.st.enabled && r.role == ROOT_ROLE {
                    return Err(Error::InvalidAuthMgmt);
                }
                if !ch.st.roles.contains_key(&r.role) {
                    return Err(Error::RoleNotFound);
                }
                ch.batch.delete_cf(ch.meta, keys::auth_role_key(r.role.as_bytes()));
                ch.st.roles.remove(&r.role);
                let holders: Vec<User> = ch.st.users.values().filter(|u| u.roles.contains(&r.role)).cloned().collect();
                for mut u in holders {
                    u.roles.retain(|x| *x != r.role);
                    ch.put_user(u);
                }
                ch.bump();
            }
            AuthCommand::RoleGrantPermission(r) => {
                let perm = r.perm.as_ref().ok_or(Error::PermissionNotGiven)?;
                if !is_valid_range(&perm.key, &perm.range_end) {
                    return Err(Error::InvalidAuthMgmt);
                }
                let mut role = ch.st.roles.get(&r.name).cloned().ok_or(Error::RoleNotFound)?;
                match role.key_permission.iter_mut().find(|p| p.key == perm.key && p.range_end == perm.range_end) {
                    Some(p) => p.perm_type = perm.perm_type,
                    None => {
                        role.key_permission.push(perm.clone());
                        role.key_permission.sort_by(|a, b| a.key.cmp(&b.key));
                    }
                }
                ch.put_role(role);
                ch.bump();
            }
            AuthCommand::RoleRevokePermission(r) => {
                let mut role = ch.st.roles.get(&r.role).cloned().ok_or(Error::RoleNotFound)?;
                let before = role.key_permission.len();
                role.key_permission.retain(|p| !(p.key == r.key && p.range_end == r.range_end));
                if role.key_permission.len() == before {
                    return Err(Error::PermissionNotGranted);
                }
                ch.put_role(role);
                ch.bump();
            }
        }
        Ok(AuthReply::default())
    }
}

fn check_key(st: &State, info: Option<&AuthInfo>, access: Access, key: &[u8], range_end: &[u8]) -> Result<()> {
    if !st.enabled {
        return Ok(());
    }
    let Some(info) = info.filter(|i| i.revision != 0) else { return Err(Error::UserEmpty) };
    if info.revision < st.revision {
        return Err(Error::AuthOldRevision);
    }
    let Some(u) = st.users.get(&info.username) else { return Err(Error::PermissionDenied) };
    if is_root(u) || st.perms.get(&info.username).is_some_and(|p| p.allows(access, key, range_end)) {
        Ok(())
    } else {
        Err(Error::PermissionDenied)
    }
}

fn check_admin(st: &State, info: Option<&AuthInfo>) -> bool {
    info.and_then(|i| st.users.get(&i.username)).is_some_and(is_root)
}

/// A lease's keys must all be writable by whoever attaches to or revokes
/// it (etcd `checkLeasePuts`); an admin may always.
fn check_lease_keys(st: &State, info: Option<&AuthInfo>, keys: &[Vec<u8>]) -> Result<()> {
    if check_admin(st, info) {
        return Ok(());
    }
    for k in keys {
        check_key(st, info, Access::Write, k, &[])?;
    }
    Ok(())
}

fn check_put(st: &State, info: Option<&AuthInfo>, p: &proto::etcdserverpb::PutRequest, lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>) -> Result<()> {
    check_key(st, info, Access::Write, &p.key, &[])?;
    if p.lease != 0 {
        check_lease_keys(st, info, &lease_keys(p.lease))?;
    }
    if p.prev_kv {
        check_key(st, info, Access::Read, &p.key, &[])?;
    }
    Ok(())
}

fn check_txn(st: &State, info: Option<&AuthInfo>, t: &TxnRequest, lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>) -> Result<()> {
    if !st.enabled {
        return Ok(());
    }
    for c in &t.compare {
        check_key(st, info, Access::Read, &c.key, &c.range_end)?;
    }
    for op in t.success.iter().chain(t.failure.iter()) {
        match &op.request {
            Some(RequestOpRequest::RequestRange(r)) => check_key(st, info, Access::Read, &r.key, &r.range_end)?,
            Some(RequestOpRequest::RequestPut(p)) => check_put(st, info, p, lease_keys)?,
            Some(RequestOpRequest::RequestDeleteRange(d)) => {
                if d.prev_kv {
                    check_key(st, info, Access::Read, &d.key, &d.range_end)?;
                }
                check_key(st, info, Access::Write, &d.key, &d.range_end)?;
            }
            Some(RequestOpRequest::RequestTxn(inner)) => check_txn(st, info, inner, lease_keys)?,
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proto::etcdserverpb::{AuthRoleAddRequest, AuthRoleGrantPermissionRequest, AuthUserAddRequest, AuthUserGrantRoleRequest, PutRequest};

    use super::super::perm_type;
    use super::*;

    fn store() -> (tempfile::TempDir, AuthStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::storage::open(dir.path()).unwrap();
        let s = AuthStore::open(db, TokenProvider::simple(super::super::token::DEFAULT_TTL), 4).unwrap();
        (dir, s)
    }

    fn ok(s: &AuthStore, c: AuthCommand) -> AuthReply {
        match s.apply(&c, 1, |_| Ok(())).unwrap() {
            CommandResponse::Auth(r) => r,
            other => panic!("{c:?}: {other:?}"),
        }
    }

    fn err(s: &AuthStore, c: AuthCommand) -> Error {
        match s.apply(&c, 1, |_| Ok(())).unwrap() {
            CommandResponse::Error(e) => e,
            other => panic!("{c:?}: {other:?}"),
        }
    }

    fn user_add(name: &str, pw: &str) -> AuthCommand {
        AuthCommand::UserAdd(AuthUserAddRequest { name: name.into(), password: pw.into(), ..Default::default() })
    }

    #[test]
    fn enable_needs_root_and_the_revision_counts_changes() {
        let (_d, s) = store();
        assert_eq!(s.revision(), 1);
        assert_eq!(err(&s, AuthCommand::Enable), Error::RootUserNotExist);
        ok(&s, user_add("root", "pw"));
        assert_eq!(s.revision(), 2);
        assert_eq!(err(&s, AuthCommand::Enable), Error::RootRoleNotExist);
        assert_eq!(err(&s, user_add("root", "x")), Error::UserAlreadyExist);
        assert_eq!(s.revision(), 2, "a refused change does not count");
        ok(&s, AuthCommand::UserGrantRole(AuthUserGrantRoleRequest { user: "root".into(), role: "root".into() }));
        ok(&s, AuthCommand::Enable);
        assert!(s.enabled());
        assert_eq!(s.revision(), 3, "enable does not count");
        assert_eq!(s.check_password("root", "pw"), Ok(3));
        assert_eq!(s.check_password("root", "bad"), Err(Error::AuthFailed));
        assert_eq!(s.check_password("nobody", "pw"), Err(Error::AuthFailed));
        ok(&s, AuthCommand::Disable);
        assert_eq!(s.revision(), 4);
        assert_eq!(s.check_password("root", "pw"), Err(Error::AuthNotEnabled));
    }

    #[test]
    fn permissions_are_checked_at_the_tokens_revision_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::storage::open(dir.path()).unwrap();
        let s = AuthStore::open(db.clone(), TokenProvider::simple(super::super::token::DEFAULT_TTL), 4).unwrap();
        ok(&s, user_add("root", "pw"));
        ok(&s, AuthCommand::UserGrantRole(AuthUserGrantRoleRequest { user: "root".into(), role: "root".into() }));
        ok(&s, user_add("alice", "pw"));
        ok(&s, AuthCommand::RoleAdd(AuthRoleAddRequest { name: "r".into() }));
        let perm = Permission { perm_type: perm_type::READWRITE, key: b"/a/".to_vec(), range_end: b"/a0".to_vec() };
        ok(&s, AuthCommand::RoleGrantPermission(AuthRoleGrantPermissionRequest { name: "r".into(), perm: Some(perm) }));
        ok(&s, AuthCommand::UserGrantRole(AuthUserGrantRoleRequest { user: "alice".into(), role: "r".into() }));
        ok(&s, AuthCommand::Enable);
        let rev = s.revision();
        let alice = AuthInfo { username: "alice".into(), revision: rev };
        let put = |k: &str| Command::Put(PutRequest { key: k.into(), ..Default::default() });
        let none = |_: i64| Vec::new();
        assert_eq!(s.check_command(&alice, &put("/a/x"), &none), Ok(()));
        assert_eq!(s.check_command(&alice, &put("/b"), &none), Err(Error::PermissionDenied));
        assert_eq!(s.check_command(&AuthInfo::default(), &put("/a/x"), &none), Err(Error::UserEmpty));
        assert_eq!(s.check_command(&AuthInfo { revision: rev - 1, ..alice.clone() }, &put("/a/x"), &none), Err(Error::AuthOldRevision));
        let root = AuthInfo { username: "root".into(), revision: rev };
        assert_eq!(s.check_command(&root, &put("/b"), &none), Ok(()));
        assert_eq!(s.check_command(&alice, &Command::Auth(AuthCommand::Disable), &none), Err(Error::PermissionDenied));
        assert_eq!(s.check_command(&root, &Command::Auth(AuthCommand::Disable), &none), Ok(()));
        // A lease with a key alice cannot write cannot be used by her.
        assert_eq!(s.check_command(&alice, &Command::Put(PutRequest { key: b"/a/y".to_vec(), lease: 5, ..Default::default() }), &|_| vec![b"/b".to_vec()]), Err(Error::PermissionDenied));
        assert_eq!(err(&s, AuthCommand::UserDelete(proto::etcdserverpb::AuthUserDeleteRequest { name: "root".into() })), Error::InvalidAuthMgmt);
        drop(s);
        let s = AuthStore::open(db, TokenProvider::simple(super::super::token::DEFAULT_TTL), 4).unwrap();
        assert!(s.enabled());
        assert_eq!(s.revision(), rev);
        assert_eq!(s.check_command(&alice, &put("/a/x"), &none), Ok(()));
        assert_eq!(s.check_command(&alice, &put("/b"), &none), Err(Error::PermissionDenied));
    }

    #[test]
    fn simple_tokens_name_the_entry_and_go_with_the_user() {
        let (_d, s) = store();
        ok(&s, user_add("root", "pw"));
        ok(&s, AuthCommand::UserGrantRole(AuthUserGrantRoleRequest { user: "root".into(), role: "root".into() }));
        let auth = AuthCommand::Authenticate(super::super::command::InternalAuthenticate { name: "root".into(), simple_token: "abc".into() });
        assert_eq!(err(&s, auth.clone()), Error::AuthNotEnabled);
        ok(&s, AuthCommand::Enable);
        let token = match s.apply(&auth, 42, |_| Ok(())).unwrap() {
            CommandResponse::Auth(r) => r.token,
            other => panic!("{other:?}"),
        };
        assert_eq!(token, "abc.42");
        assert_eq!(s.token_info(&token).unwrap().map(|i| i.username), Some("root".into()));
        assert_eq!(s.token_info("abc.43"), Err(Error::InvalidAuthToken));
        ok(&s, AuthCommand::Disable);
        assert_eq!(s.token_info(&token), Ok(None), "auth is off");
        ok(&s, AuthCommand::Enable);
        assert_eq!(s.token_info(&token), Err(Error::InvalidAuthToken), "disabling dropped the tokens");
    }
}
