//! etcd `Auth` service (etcd `v3rpc/auth.go`, `etcdserver/v3_server.go`):
//! users, roles, permissions, auth enable/disable and Authenticate; and
//! [`caller`], which every service uses to learn who sent a request.
//!
//! Changes go through Raft as [`AuthCommand`]s, wrapped with the caller's
//! identity so that every member checks, when it applies them, that the
//! caller is an admin (etcd's `needAdminPermission`). Reads (UserGet,
//! UserList, RoleGet, RoleList, AuthStatus) are served after a
//! linearizable read with the same checks made here: UserGet of oneself
//! and RoleGet of one's own role need no admin.

use proto::etcdserverpb::server::Auth;
use proto::etcdserverpb::{
    AuthDisableRequest, AuthDisableResponse, AuthEnableRequest, AuthEnableResponse, AuthRoleAddRequest, AuthRoleAddResponse, AuthRoleDeleteRequest, AuthRoleDeleteResponse, AuthRoleGetRequest,
    AuthRoleGetResponse, AuthRoleGrantPermissionRequest, AuthRoleGrantPermissionResponse, AuthRoleListRequest, AuthRoleListResponse, AuthRoleRevokePermissionRequest, AuthRoleRevokePermissionResponse,
    AuthStatusRequest, AuthStatusResponse, AuthUserAddRequest, AuthUserAddResponse, AuthUserChangePasswordRequest, AuthUserChangePasswordResponse, AuthUserDeleteRequest, AuthUserDeleteResponse,
    AuthUserGetRequest, AuthUserGetResponse, AuthUserGrantRoleRequest, AuthUserGrantRoleResponse, AuthUserListRequest, AuthUserListResponse, AuthUserRevokeRoleRequest, AuthUserRevokeRoleResponse,
    AuthenticateRequest, AuthenticateResponse,
};
use tonic::{Request, Response, Status};

use super::{Context, Ctx};
use crate::auth::command::{AuthHeader, InternalAuthenticate};
use crate::auth::{AuthCommand, AuthInfo, AuthReply};
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};
use crate::serving::ClientCertName;

/// gRPC metadata that carries the token (etcd `rpctypes.TokenFieldNameGRPC`).
const TOKEN_KEY: &str = "token";
/// The gRPC gateway's header for the token, `Bearer <token>` (etcd
/// `TokenFieldNameSwagger`).
const AUTHORIZATION_KEY: &str = "authorization";

/// What a request offers to say who sent it: a token, and the common name
/// of the connection's verified client certificate.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    token: Option<String>,
    cert_name: Option<String>,
}

impl Credentials {
    /// The credentials of `req`.
    pub fn of<T>(req: &Request<T>) -> Self {
        let md = req.metadata();
        let token = md.get(TOKEN_KEY).or_else(|| md.get(AUTHORIZATION_KEY)).and_then(|v| v.to_str().ok()).map(|t| t.trim_start_matches("Bearer ").to_string());
        let cert_name = req.extensions().get::<ClientCertName>().map(|c| c.0.clone()).filter(|c| !c.is_empty());
        Credentials { token, cert_name }
    }

    /// Who these credentials name (etcd `AuthInfoFromCtx`, then
    /// `AuthInfoFromTLS` under `--client-cert-auth`): the user the token
    /// names, else the common name of the client certificate; `None` when
    /// auth is disabled or neither is given. A simple token issued by
    /// another member is looked up once this member has applied the entry
    /// that issued it.
    ///
    /// # Errors
    /// [`Error::InvalidAuthToken`] for an unknown, expired or forged token.
    pub async fn resolve(&self, ctx: &Context) -> Result<Option<AuthInfo>> {
        if !ctx.auth.enabled() {
            return Ok(None);
        }
        if let Some(token) = &self.token {
            if let Some(index) = ctx.auth.tokens().simple_index(token) {
                let _ = tokio::time::timeout(ctx.node.request_timeout, ctx.node.wait_applied(index)).await;
            }
            return ctx.auth.token_info(token);
        }
        match &self.cert_name {
            Some(cn) if ctx.client_cert_auth => Ok(Some(AuthInfo { username: cn.clone(), revision: ctx.auth.revision() })),
            _ => Ok(None),
        }
    }
}

/// Who sent `req`; see [`Credentials::resolve`].
///
/// # Errors
/// [`Error::InvalidAuthToken`] for an unknown, expired or forged token.
pub async fn caller<T>(ctx: &Context, req: &Request<T>) -> Result<Option<AuthInfo>> {
    Credentials::of(req).resolve(ctx).await
}

/// Wraps a client's command with its identity when auth is enabled or the
/// client named itself; see [`Command::Authed`].
pub fn with_caller(ctx: &Context, who: Option<&AuthInfo>, cmd: Command) -> Command {
    if who.is_none() && !ctx.auth.enabled() {
        return cmd;
    }
    let h = who.map(|i| AuthHeader { username: i.username.clone(), auth_revision: i.revision }).unwrap_or_default();
    Command::Authed(h, Box::new(cmd))
}

/// The keys attached to lease `id` (for the lease checks of puts).
pub fn lease_keys(ctx: &Context) -> impl Fn(i64) -> Vec<Vec<u8>> + '_ {
    |id| ctx.store.lease(id).map(|l| l.keys.into_iter().collect()).unwrap_or_default()
}

/// The Auth service.
pub struct AuthService {
    ctx: Ctx,
}

impl AuthService {
    /// An auth service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        AuthService { ctx }
    }

    /// Proposes an auth change made by the caller of `req`.
    async fn change<T>(&self, req: &Request<T>, cmd: AuthCommand) -> Result<AuthReply> {
        let who = caller(&self.ctx, req).await?;
        let cmd = Command::Authed(who.map(|i| AuthHeader { username: i.username, auth_revision: i.revision }).unwrap_or_default(), Box::new(Command::Auth(cmd)));
        match self.ctx.node.propose(cmd).await? {
            CommandResponse::Auth(r) => Ok(r),
            other => Err(Error::internal(format!("unexpected reply {other:?}"))),
        }
    }

    /// The caller of a read, after a linearizable read.
    async fn reader<T>(&self, req: &Request<T>) -> Result<Option<AuthInfo>> {
        self.ctx.node.linearizable_read().await?;
        caller(&self.ctx, req).await
    }

    fn header(&self) -> Option<proto::etcdserverpb::ResponseHeader> {
        self.ctx.header(self.ctx.store.current_revision())
    }
}

type Res<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(&self, req: Request<AuthEnableRequest>) -> Res<AuthEnableResponse> {
        self.change(&req, AuthCommand::Enable).await?;
        Ok(Response::new(AuthEnableResponse { header: self.header() }))
    }

    async fn auth_disable(&self, req: Request<AuthDisableRequest>) -> Res<AuthDisableResponse> {
        self.change(&req, AuthCommand::Disable).await?;
        Ok(Response::new(AuthDisableResponse { header: self.header() }))
    }

    async fn auth_status(&self, req: Request<AuthStatusRequest>) -> Res<AuthStatusResponse> {
        self.reader(&req).await?;
        Ok(Response::new(AuthStatusResponse { header: self.header(), enabled: self.ctx.auth.enabled(), auth_revision: self.ctx.auth.revision() }))
    }

    /// etcd's Authenticate: check the password here (a bcrypt verification,
    /// off the async threads), then issue the token through the log, and do
    /// it again if users or roles changed in between.
    async fn authenticate(&self, req: Request<AuthenticateRequest>) -> Res<AuthenticateResponse> {
        self.ctx.node.linearizable_read().await?;
        let AuthenticateRequest { name, password } = req.into_inner();
        loop {
            let (auth, n) = (self.ctx.auth.clone(), name.clone());
            let pw = password.clone();
            let checked = super::blocking(move || auth.check_password(&n, &pw)).await?;
            let prefix = self.ctx.auth.tokens().new_prefix();
            let cmd = Command::Auth(AuthCommand::Authenticate(InternalAuthenticate { name: name.clone(), simple_token: prefix }));
            let token = match self.ctx.node.propose(cmd).await? {
                CommandResponse::Auth(r) => r.token,
                other => return Err(Status::internal(format!("unexpected reply {other:?}"))),
            };
            if checked == self.ctx.auth.revision() {
                return Ok(Response::new(AuthenticateResponse { header: self.header(), token }));
            }
        }
    }

    async fn user_add(&self, req: Request<AuthUserAddRequest>) -> Res<AuthUserAddResponse> {
        let mut r = req.get_ref().clone();
        if !r.options.is_some_and(|o| o.no_password) {
            let (auth, pw) = (self.ctx.auth.clone(), std::mem::take(&mut r.password));
            r.hashed_password = super::blocking(move || auth.hash_password(&pw)).await?;
        }
        self.change(&req, AuthCommand::UserAdd(r)).await?;
        Ok(Response::new(AuthUserAddResponse { header: self.header() }))
    }

    async fn user_get(&self, req: Request<AuthUserGetRequest>) -> Res<AuthUserGetResponse> {
        let who = self.reader(&req).await?;
        let name = &req.get_ref().name;
        if let Err(e) = self.ctx.auth.check_admin(who.as_ref()) {
            if who.as_ref().is_none_or(|w| w.username != *name) {
                return Err(e.into());
            }
        }
        let roles = self.ctx.auth.user_roles(name)?;
        Ok(Response::new(AuthUserGetResponse { header: self.header(), roles }))
    }

    async fn user_list(&self, req: Request<AuthUserListRequest>) -> Res<AuthUserListResponse> {
        let who = self.reader(&req).await?;
        self.ctx.auth.check_admin(who.as_ref())?;
        Ok(Response::new(AuthUserListResponse { header: self.header(), users: self.ctx.auth.user_names() }))
    }

    async fn user_delete(&self, req: Request<AuthUserDeleteRequest>) -> Res<AuthUserDeleteResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::UserDelete(r)).await?;
        Ok(Response::new(AuthUserDeleteResponse { header: self.header() }))
    }

    async fn user_change_password(&self, req: Request<AuthUserChangePasswordRequest>) -> Res<AuthUserChangePasswordResponse> {
        let mut r = req.get_ref().clone();
        let (auth, pw) = (self.ctx.auth.clone(), std::mem::take(&mut r.password));
        r.hashed_password = super::blocking(move || auth.hash_password(&pw)).await?;
        self.change(&req, AuthCommand::UserChangePassword(r)).await?;
        Ok(Response::new(AuthUserChangePasswordResponse { header: self.header() }))
    }

    async fn user_grant_role(&self, req: Request<AuthUserGrantRoleRequest>) -> Res<AuthUserGrantRoleResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::UserGrantRole(r)).await?;
        Ok(Response::new(AuthUserGrantRoleResponse { header: self.header() }))
    }

    async fn user_revoke_role(&self, req: Request<AuthUserRevokeRoleRequest>) -> Res<AuthUserRevokeRoleResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::UserRevokeRole(r)).await?;
        Ok(Response::new(AuthUserRevokeRoleResponse { header: self.header() }))
    }

    async fn role_add(&self, req: Request<AuthRoleAddRequest>) -> Res<AuthRoleAddResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::RoleAdd(r)).await?;
        Ok(Response::new(AuthRoleAddResponse { header: self.header() }))
    }

    async fn role_get(&self, req: Request<AuthRoleGetRequest>) -> Res<AuthRoleGetResponse> {
        let who = self.reader(&req).await?;
        let role = &req.get_ref().role;
        if let Err(e) = self.ctx.auth.check_admin(who.as_ref()) {
            if !who.as_ref().is_some_and(|w| self.ctx.auth.has_role(&w.username, role)) {
                return Err(e.into());
            }
        }
        let perm = self.ctx.auth.role_perms(role)?;
        Ok(Response::new(AuthRoleGetResponse { header: self.header(), perm }))
    }

    async fn role_list(&self, req: Request<AuthRoleListRequest>) -> Res<AuthRoleListResponse> {
        let who = self.reader(&req).await?;
        self.ctx.auth.check_admin(who.as_ref())?;
        Ok(Response::new(AuthRoleListResponse { header: self.header(), roles: self.ctx.auth.role_names() }))
    }

    async fn role_delete(&self, req: Request<AuthRoleDeleteRequest>) -> Res<AuthRoleDeleteResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::RoleDelete(r)).await?;
        Ok(Response::new(AuthRoleDeleteResponse { header: self.header() }))
    }

    async fn role_grant_permission(&self, req: Request<AuthRoleGrantPermissionRequest>) -> Res<AuthRoleGrantPermissionResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::RoleGrantPermission(r)).await?;
        Ok(Response::new(AuthRoleGrantPermissionResponse { header: self.header() }))
    }

    async fn role_revoke_permission(&self, req: Request<AuthRoleRevokePermissionRequest>) -> Res<AuthRoleRevokePermissionResponse> {
        let r = req.get_ref().clone();
        self.change(&req, AuthCommand::RoleRevokePermission(r)).await?;
        Ok(Response::new(AuthRoleRevokePermissionResponse { header: self.header() }))
    }
}
