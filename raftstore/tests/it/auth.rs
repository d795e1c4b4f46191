//! etcd's Auth service: etcdctl's `user`, `role` and `auth` commands and
//! `--user`, the etcd-client crate's auth calls, JWT tokens (each against
//! real etcd first, then raftstore), and, for raftstore, auth state that is
//! replicated to every member and survives a restart.

use std::time::Duration;

use etcd_client::proto::{PbAuthenticateRequest, PbAuthenticateResponse, PbRangeRequest, PbRangeResponse};
use etcd_client::{Client, ConnectOptions, Permission};

use crate::common::cluster::{put_until_ok, start_new};
use crate::common::{block_on, connect, etcdctl, for_each_kind, status_of, Options, Server};

/// Sets up etcd's usual first steps: root (with the root role), and
/// `alice` with role `r1` that may read and write the prefix `/a/`.
fn users_and_roles(ep: &str) {
    assert_eq!(etcdctl(ep, &["user", "add", "root:rootpw"]).ok(), "User root created\n");
    assert_eq!(etcdctl(ep, &["user", "add", "alice:apw"]).ok(), "User alice created\n");
    assert_eq!(etcdctl(ep, &["role", "add", "r1"]).ok(), "Role r1 created\n");
    assert_eq!(etcdctl(ep, &["role", "grant-permission", "r1", "readwrite", "/a/", "--prefix"]).ok(), "Role r1 updated\n");
    assert_eq!(etcdctl(ep, &["user", "grant-role", "alice", "r1"]).ok(), "Role r1 is granted to user alice\n");
}

#[track_caller]
fn fails_with(out: crate::common::etcdctl::Output, msg: &str) {
    assert!(out.err().contains(msg), "want {msg:?} in: {out}");
}

#[test]
fn etcdctl_users_roles_and_auth_enable_disable() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        users_and_roles(ep);
        // etcdctl creates the root role and grants it to root itself.
        assert_eq!(etcdctl(ep, &["auth", "enable"]).ok(), "Authentication Enabled\n");

        fails_with(etcdctl(ep, &["get", "/a/x"]), "Error: etcdserver: user name is empty");
        fails_with(etcdctl(ep, &["put", "/a/x", "1"]), "Error: etcdserver: user name is empty");
        assert_eq!(etcdctl(ep, &["--user", "alice:apw", "put", "/a/x", "1"]).ok(), "OK\n");
        assert_eq!(etcdctl(ep, &["--user", "alice:apw", "get", "/a/x"]).ok(), "/a/x\n1\n");
        assert_eq!(etcdctl(ep, &["--user", "alice:apw", "get", "/a/", "--prefix", "--keys-only"]).ok(), "/a/x\n\n");
        fails_with(etcdctl(ep, &["--user", "alice:apw", "put", "/b", "1"]), "Error: etcdserver: permission denied");
        fails_with(etcdctl(ep, &["--user", "alice:apw", "get", "/", "--prefix"]), "Error: etcdserver: permission denied");
        fails_with(etcdctl(ep, &["--user", "alice:bad", "get", "/a/x"]), "Error: etcdserver: authentication failed, invalid user ID or password");
        fails_with(etcdctl(ep, &["--user", "nobody:x", "get", "/a/x"]), "Error: etcdserver: authentication failed, invalid user ID or password");
        fails_with(etcdctl(ep, &["--user", "alice:apw", "user", "list"]), "Error: etcdserver: permission denied");
        // Without the scheme: etcdctl's defrag dials the endpoint as the
        // HTTP/2 authority, which h2 refuses with one (NOTES.md).
        let bare = ep.trim_start_matches("http://");
        fails_with(etcdctl(bare, &["--user", "alice:apw", "defrag"]), "auth: permission denied");
        fails_with(etcdctl(bare, &["defrag"]), "auth: user name is empty");
        // A user may read itself and its own roles.
        assert_eq!(etcdctl(ep, &["--user", "alice:apw", "user", "get", "alice"]).ok(), "User: alice\nRoles: r1\n");
        assert_eq!(etcdctl(ep, &["--user", "alice:apw", "role", "get", "r1"]).ok(), "Role r1\nKV Read:\n\t[/a/, /a0) (prefix /a/)\nKV Write:\n\t[/a/, /a0) (prefix /a/)\n");

        let root = ["--user", "root:rootpw"];
        let as_root = |args: &[&str]| etcdctl(ep, &[&root[..], args].concat());
        assert_eq!(as_root(&["user", "list"]).ok(), "alice\nroot\n");
        assert_eq!(as_root(&["role", "list"]).ok(), "r1\nroot\n");
        assert_eq!(as_root(&["user", "get", "root"]).ok(), "User: root\nRoles: root\n");
        assert_eq!(as_root(&["put", "/b", "2"]).ok(), "OK\n");
        fails_with(as_root(&["user", "delete", "root"]), "Error: etcdserver: invalid auth management");
        fails_with(as_root(&["role", "delete", "root"]), "Error: etcdserver: invalid auth management");
        fails_with(as_root(&["user", "revoke-role", "root", "root"]), "Error: etcdserver: invalid auth management");
        fails_with(as_root(&["user", "add", "alice:x"]), "Error: etcdserver: user name already exists");
        fails_with(as_root(&["user", "grant-role", "alice", "nope"]), "Error: etcdserver: role name not found");
        fails_with(as_root(&["user", "revoke-role", "alice", "nope"]), "Error: etcdserver: role is not granted to the user");
        fails_with(as_root(&["role", "revoke-permission", "r1", "/zz"]), "Error: etcdserver: permission is not granted to the role");
        fails_with(as_root(&["user", "get", "nobody"]), "Error: etcdserver: user name not found");

        // Taking the permission away takes effect at once.
        as_root(&["role", "revoke-permission", "r1", "/a/", "--prefix"]).ok();
        fails_with(etcdctl(ep, &["--user", "alice:apw", "get", "/a/x"]), "Error: etcdserver: permission denied");
        assert_eq!(as_root(&["auth", "disable"]).ok(), "Authentication Disabled\n");
        assert_eq!(etcdctl(ep, &["get", "/b"]).ok(), "/b\n2\n");
        // etcdctl goes on without a token when auth is off.
        assert_eq!(etcdctl(ep, &["--user", "alice:apw", "get", "/b"]).ok(), "/b\n2\n");
    });
}

/// A gRPC call with an explicit `token` metadata value (etcd-client hides
/// its token).
async fn raw<Req, Resp>(ep: &str, path: &'static str, req: Req, token: Option<&str>) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let url = format!("http://{}", ep.trim_start_matches("http://"));
    let channel = tonic::transport::Endpoint::from_shared(url).expect("endpoint").connect().await.expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let mut r = tonic::Request::new(req);
    if let Some(t) = token {
        r.metadata_mut().insert("token", t.parse().expect("token metadata"));
    }
    grpc.unary(r, http::uri::PathAndQuery::from_static(path), tonic_prost::ProstCodec::default()).await.map(tonic::Response::into_inner)
}

async fn authenticate(ep: &str, name: &str, password: &str) -> Result<String, tonic::Status> {
    let r: PbAuthenticateResponse = raw(ep, "/etcdserverpb.Auth/Authenticate", PbAuthenticateRequest { name: name.into(), password: password.into() }, None).await?;
    Ok(r.token)
}

async fn get_with(ep: &str, key: &str, token: Option<&str>) -> Result<PbRangeResponse, tonic::Status> {
    raw(ep, "/etcdserverpb.KV/Range", PbRangeRequest { key: key.into(), ..Default::default() }, token).await
}

async fn user_client(ep: &str, user: &str, password: &str) -> Result<Client, etcd_client::Error> {
    let opts = ConnectOptions::new().with_user(user, password).with_connect_timeout(Duration::from_secs(5)).with_timeout(Duration::from_secs(15));
    Client::connect([ep], Some(opts)).await
}

/// Sets up root and `bob`, who may read `/r/`, and enables auth, all
/// through the etcd-client crate.
async fn enable_with_client(c: &mut Client) {
    let mut a = c.auth_client();
    a.user_add("root", "rootpw", None).await.expect("user add root");
    a.role_add("root").await.expect("role add root");
    a.user_grant_role("root", "root").await.expect("grant root");
    a.user_add("bob", "bpw", None).await.expect("user add bob");
    a.role_add("reader").await.expect("role add");
    a.role_grant_permission("reader", Permission::read("/r/").with_prefix()).await.expect("grant permission");
    a.user_grant_role("bob", "reader").await.expect("grant role");
    a.auth_enable().await.expect("auth enable");
}

#[test]
fn etcd_client_auth_calls() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint().to_string();
        block_on(async {
            let mut anon = connect(&ep).await;
            enable_with_client(&mut anon).await;
            let err = anon.get("/r/x", None).await.expect_err("anonymous");
            assert_eq!(status_of(&err), (tonic::Code::InvalidArgument, "etcdserver: user name is empty".into()));

            let mut root = user_client(&ep, "root", "rootpw").await.expect("root connects");
            root.put("/r/x", "1", None).await.expect("root writes anywhere");
            let mut bob = user_client(&ep, "bob", "bpw").await.expect("bob connects");
            assert_eq!(bob.get("/r/x", None).await.expect("bob reads /r/").kvs()[0].value(), b"1");
            let err = bob.put("/r/x", "2", None).await.expect_err("bob may not write");
            assert_eq!(status_of(&err), (tonic::Code::PermissionDenied, "etcdserver: permission denied".into()));
            let err = bob.get("/s", None).await.expect_err("outside /r/");
            assert_eq!(status_of(&err), (tonic::Code::PermissionDenied, "etcdserver: permission denied".into()));
            let err = user_client(&ep, "bob", "wrong").await.err().expect("wrong password");
            assert_eq!(status_of(&err), (tonic::Code::InvalidArgument, "etcdserver: authentication failed, invalid user ID or password".into()));

            // A watch outside one's permission is created and cancelled at once.
            let mut stream = bob.watch("/s", None).await.expect("watch call");
            let resp = stream.message().await.expect("watch response").expect("a response");
            assert!(resp.created() && resp.canceled(), "{resp:?}");
            assert_eq!(resp.cancel_reason(), "rpc error: code = PermissionDenied desc = etcdserver: permission denied");
            assert_eq!(resp.watch_id(), -1);

            let mut a = root.auth_client();
            assert_eq!(a.user_get("bob").await.expect("user get").roles(), ["reader"]);
            assert_eq!(a.user_list().await.expect("user list").users(), ["bob", "root"]);
            assert_eq!(a.role_list().await.expect("role list").roles(), ["reader", "root"]);
            let perms = a.role_get("reader").await.expect("role get");
            let p = &perms.permissions()[0];
            assert_eq!((p.key(), p.range_end(), p.get_type()), (&b"/r/"[..], &b"/r0"[..], etcd_client::PermissionType::Read as i32));
            let cases: Vec<(Result<(), etcd_client::Error>, tonic::Code, &str)> = vec![
                (a.user_add("bob", "x", None).await.map(drop), tonic::Code::FailedPrecondition, "etcdserver: user name already exists"),
                (a.user_delete("nobody").await.map(drop), tonic::Code::FailedPrecondition, "etcdserver: user name not found"),
                (a.role_add("reader").await.map(drop), tonic::Code::FailedPrecondition, "etcdserver: role name already exists"),
                (a.role_delete("nope").await.map(drop), tonic::Code::FailedPrecondition, "etcdserver: role name not found"),
                (a.user_revoke_role("bob", "nope").await.map(drop), tonic::Code::FailedPrecondition, "etcdserver: role is not granted to the user"),
                (a.role_revoke_permission("reader", "/zz", None).await.map(drop), tonic::Code::FailedPrecondition, "etcdserver: permission is not granted to the role"),
                (a.user_delete("root").await.map(drop), tonic::Code::InvalidArgument, "etcdserver: invalid auth management"),
                (a.role_add("").await.map(drop), tonic::Code::InvalidArgument, "etcdserver: role name is empty"),
            ];
            for (got, code, msg) in cases {
                let err = got.expect_err(msg);
                assert_eq!(status_of(&err), (code, msg.to_string()));
            }
            let err = bob.auth_client().user_list().await.expect_err("bob is no admin");
            assert_eq!(status_of(&err), (tonic::Code::PermissionDenied, "etcdserver: permission denied".into()));

            // A token nobody issued (naming an entry both have applied: a
            // simple token naming a later one waits for it, on etcd with
            // no end).
            let err = get_with(&ep, "/r/x", Some("bogusbogusbogusb.1")).await.expect_err("bogus token");
            assert_eq!((err.code(), err.message()), (tonic::Code::Unauthenticated, "etcdserver: invalid auth token"));
            // Alarms need no token, but a bad one is refused (etcd checks
            // it when it proposes the request, with the unconverted error).
            let alarm_get = || etcd_client::proto::PbAlarmRequest { action: 0, member_id: 0, alarm: 0 };
            let err = raw::<_, etcd_client::proto::PbAlarmResponse>(&ep, "/etcdserverpb.Maintenance/Alarm", alarm_get(), Some("bogusbogusbogusb.1")).await.expect_err("alarm with a bogus token");
            assert_eq!((err.code(), err.message()), (tonic::Code::Unknown, "auth: invalid auth token"));
            raw::<_, etcd_client::proto::PbAlarmResponse>(&ep, "/etcdserverpb.Maintenance/Alarm", alarm_get(), None).await.expect("alarm without a token");
            // Deleting a user invalidates its tokens.
            let token = authenticate(&ep, "bob", "bpw").await.expect("authenticate");
            get_with(&ep, "/r/x", Some(&token)).await.expect("token works");
            a.user_delete("bob").await.expect("delete bob");
            let err = get_with(&ep, "/r/x", Some(&token)).await.expect_err("deleted user");
            assert_eq!((err.code(), err.message()), (tonic::Code::Unauthenticated, "etcdserver: invalid auth token"));

            a.auth_disable().await.expect("auth disable");
            anon.get("/r/x", None).await.expect("open again");
            let err = authenticate(&ep, "root", "rootpw").await.expect_err("auth is off");
            assert_eq!((err.code(), err.message()), (tonic::Code::FailedPrecondition, "etcdserver: authentication is not enabled"));
        });
    });
}

/// The payload of a JWT, as JSON.
fn jwt_claims(token: &str) -> serde_json::Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("three parts");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

#[test]
fn jwt_tokens_name_the_user_and_revision() {
    for_each_kind(|kind| {
        let keys = tempfile::tempdir().expect("tempdir");
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let (priv_path, pub_path) = (keys.path().join("jwt.key"), keys.path().join("jwt.pub"));
        std::fs::write(&priv_path, key.serialize_pem()).expect("write key");
        std::fs::write(&pub_path, key.public_key_pem()).expect("write public key");
        let flag = format!("--auth-token=jwt,pub-key={},priv-key={},sign-method=ES256,ttl=10m", pub_path.display(), priv_path.display());
        let s = Server::start_with(kind, Options { args: vec![flag], ..Default::default() });
        let ep = s.endpoint().to_string();
        block_on(async {
            let mut c = connect(&ep).await;
            enable_with_client(&mut c).await;
            let token = authenticate(&ep, "bob", "bpw").await.expect("authenticate");
            let claims = jwt_claims(&token);
            assert_eq!(claims["username"], "bob", "{claims}");
            assert!(claims["revision"].as_u64().is_some_and(|r| r > 1), "{claims}");
            let exp = claims["exp"].as_u64().expect("exp");
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
            assert!((now + 500..=now + 700).contains(&exp), "exp {exp} is not about 10 minutes from {now}");
            get_with(&ep, "/r/x", Some(&token)).await.expect("the JWT works");
            // Change a character in the middle of the signature: its last
            // character also carries padding bits, which Go's decoder
            // ignores, so changing that one may change nothing.
            let sig_start = token.rfind('.').expect("signature") + 1;
            let mid = sig_start + (token.len() - sig_start) / 2;
            let mut forged = token.clone();
            let swapped = if &token[mid..=mid] == "A" { "B" } else { "A" };
            forged.replace_range(mid..=mid, swapped);
            let err = get_with(&ep, "/r/x", Some(&forged)).await.expect_err("forged");
            assert_eq!((err.code(), err.message()), (tonic::Code::Unauthenticated, "etcdserver: invalid auth token"));
            // A change to users or roles makes older JWTs stale for writes.
            let root = user_client(&ep, "root", "rootpw").await.expect("root");
            root.auth_client().role_add("another").await.expect("role add");
            let root_token = authenticate(&ep, "root", "rootpw").await.expect("root token");
            assert!(jwt_claims(&root_token)["revision"].as_u64() > claims["revision"].as_u64());
        });
        assert_eq!(etcdctl(&ep, &["--user", "bob:bpw", "get", "/r/x"]).ok(), "");
    });
}

/// Auth state goes through Raft: set on one member, it holds on the
/// others (writes forwarded by a follower keep the caller), a simple token
/// from one member works on another, and all of it survives a restart of
/// the whole cluster.
#[test]
fn auth_is_replicated_and_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut procs = start_new(dir.path(), 3, &[]);
    let eps: Vec<String> = procs.iter().map(|p| p.ep()).collect();
    block_on(put_until_ok(&eps[0], "warm", "up", Duration::from_secs(30)));
    users_and_roles(&eps[0]);
    assert_eq!(etcdctl(&eps[0], &["auth", "enable"]).ok(), "Authentication Enabled\n");
    let check = |eps: &[String]| {
        for ep in eps {
            fails_with(etcdctl(ep, &["get", "/a/x"]), "Error: etcdserver: user name is empty");
            assert_eq!(etcdctl(ep, &["--user", "alice:apw", "put", "/a/x", ep.as_str()]).ok(), "OK\n", "via {ep}");
            fails_with(etcdctl(ep, &["--user", "alice:apw", "put", "/b", "1"]), "Error: etcdserver: permission denied");
            assert_eq!(etcdctl(ep, &["--user", "root:rootpw", "user", "list"]).ok(), "alice\nroot\n");
        }
    };
    check(&eps);
    block_on(async {
        let token = authenticate(&eps[0], "alice", "apw").await.expect("authenticate on m0");
        for ep in &eps[1..] {
            get_with(ep, "/a/x", Some(&token)).await.unwrap_or_else(|e| panic!("m0's token on {ep}: {e}"));
        }
    });
    for p in procs.iter_mut() {
        p.kill();
    }
    let initial = procs.iter().map(|p| p.cluster_entry()).collect::<Vec<_>>().join(",");
    for p in procs.iter_mut() {
        p.start(&initial, "new");
    }
    // Wait for a leader: alice's write succeeds once one is elected.
    let start = std::time::Instant::now();
    while etcdctl(&eps[0], &["--user", "alice:apw", "put", "/a/ready", "1"]).code != 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "no leader after the restart");
        std::thread::sleep(Duration::from_millis(200));
    }
    check(&eps);
}
