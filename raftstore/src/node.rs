//! Starting a raftstore member: open the store, start Raft, serve etcd's
//! client API and the peer transport.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use proto::etcdserverpb::server::{AuthServer, ClusterServer, LeaseServer, MaintenanceServer, WatchServer};
use proto::raftpb::raft_transport_server::RaftTransportServer;
use proto::v3electionpb::election_server::ElectionServer;
use proto::v3lockpb::lock_server::LockServer;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tower::Layer as _;

use crate::error::{Error, Result};
use crate::lease::Lessor;
use crate::mvcc::{MvccStore, WatchHub};
use crate::raft::log_store::LogStore;
use crate::raft::network::{NetworkFactory, PeerClients, PeerTls, TransportService};
use crate::raft::state_machine::StateMachine;
use crate::raft::{Member, RaftNode};
use crate::server::{self, Context};

/// How to start a member. Field names follow etcd's flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--name`.
    pub name: String,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--listen-client-urls`: each is served; port 0 picks a free port.
    /// `https://` serves TLS; `unix://HOST:PORT` (`unixs://` with TLS)
    /// listens on a unix socket named `HOST:PORT` in the working directory,
    /// as etcd does.
    pub listen_client_urls: Vec<String>,
    /// `--advertise-client-urls` (empty: the bound client address).
    pub advertise_client_urls: Vec<String>,
    /// `--listen-peer-urls`.
    pub listen_peer_urls: Vec<String>,
    /// `--initial-advertise-peer-urls` (empty: the bound peer address).
    pub initial_advertise_peer_urls: Vec<String>,
    /// `--initial-cluster`: (name, peer URL) pairs. Empty: just this member.
    pub initial_cluster: Vec<(String, String)>,
    /// `--initial-cluster-state`: `new` or `existing`.
    pub initial_cluster_state: String,
    /// `--initial-cluster-token`.
    pub initial_cluster_token: String,
    /// `--max-request-bytes`.
    pub max_request_bytes: usize,
    /// `--max-txn-ops`: ops a txn may hold (etcd's default is 128).
    pub max_txn_ops: usize,
    /// `--listen-metrics-urls`: more listeners (`http://` or, with the
    /// client TLS, `https://`) that serve only `/metrics` and `/health`.
    pub listen_metrics_urls: Vec<String>,
    /// `--wal-dir`: the directory for RocksDB's write-ahead log, which
    /// every Raft log append is synced to; `None` keeps it in the database
    /// directory (`<data-dir>/db`). See [`crate::storage::open_with_wal`].
    pub wal_dir: Option<PathBuf>,
    /// `--auto-tls`: without `client_tls`, serve `https://` client URLs
    /// with a self-signed certificate kept in `<data-dir>/fixtures/client`
    /// (see [`crate::tls`]).
    pub client_auto_tls: bool,
    /// `--peer-auto-tls`: without `peer_tls`, serve and dial `https://`
    /// peer URLs with a self-signed certificate kept in
    /// `<data-dir>/fixtures/peer`; the other members' certificates are not
    /// verified (etcd does the same).
    pub peer_auto_tls: bool,
    /// `--self-signed-cert-validity`: years the certificates of
    /// `client_auto_tls` and `peer_auto_tls` are valid.
    pub self_signed_cert_validity: u32,
    /// `--quota-backend-bytes`: 0 for etcd's default of 2 GiB, negative for
    /// no quota.
    pub quota_backend_bytes: i64,
    /// `--heartbeat-interval`.
    pub heartbeat: Duration,
    /// `--election-timeout`.
    pub election: Duration,
    /// `--experimental-watch-progress-notify-interval`.
    pub progress_notify_interval: Duration,
    /// `--auto-compaction-mode` and `--auto-compaction-retention`.
    pub auto_compaction: Option<crate::compactor::AutoCompaction>,
    /// TLS for the client URLs (`--cert-file`, `--key-file`,
    /// `--trusted-ca-file`, `--client-cert-auth`).
    pub client_tls: Option<TlsFiles>,
    /// TLS for the peer URLs (`--peer-cert-file`, `--peer-key-file`,
    /// `--peer-trusted-ca-file`, `--peer-client-cert-auth`).
    pub peer_tls: Option<TlsFiles>,
    /// Raft log entries between snapshots (`--snapshot-count`).
    pub snapshot_count: u64,
    /// Raft log entries kept after a snapshot for slow followers to catch up
    /// from (`--experimental-snapshot-catchup-entries`); a follower further
    /// behind gets the snapshot.
    pub snapshot_catchup_entries: u64,
    /// Timeouts and the connection cap of the client and peer ports
    /// (`--max-connections`, `--max-concurrent-streams`); see
    /// [`crate::serving`].
    pub serving: crate::serving::Limits,
    /// `--auth-token`: `simple` or `jwt,pub-key=...,priv-key=...,sign-method=...,ttl=...`
    /// (see [`crate::auth::token`]).
    pub auth_token: String,
    /// `--auth-token-ttl`: how long a simple token lives without use.
    pub auth_token_ttl: Duration,
    /// `--bcrypt-cost`: the cost passwords are hashed at.
    pub bcrypt_cost: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "default".into(),
            data_dir: PathBuf::from("default.raftstore"),
            listen_client_urls: vec!["http://127.0.0.1:2379".into()],
            advertise_client_urls: Vec::new(),
            listen_peer_urls: vec!["http://127.0.0.1:2380".into()],
            initial_advertise_peer_urls: Vec::new(),
            initial_cluster: Vec::new(),
            initial_cluster_state: "new".into(),
            initial_cluster_token: "etcd-cluster".into(),
            max_request_bytes: 1_572_864,
            max_txn_ops: crate::server::kv::MAX_TXN_OPS,
            listen_metrics_urls: Vec::new(),
            wal_dir: None,
            client_auto_tls: false,
            peer_auto_tls: false,
            self_signed_cert_validity: 1,
            quota_backend_bytes: 0,
            heartbeat: Duration::from_millis(100),
            election: Duration::from_millis(1000),
            progress_notify_interval: Duration::from_secs(600),
            auto_compaction: None,
            snapshot_count: 100_000,
            snapshot_catchup_entries: 5_000,
            client_tls: None,
            peer_tls: None,
            serving: crate::serving::Limits::default(),
            auth_token: "simple".into(),
            auth_token_ttl: crate::auth::token::DEFAULT_TTL,
            bcrypt_cost: crate::auth::store::DEFAULT_BCRYPT_COST,
        }
    }
}

/// PEM files for one side's TLS, named after etcd's flags.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// Certificate chain (`--cert-file` / `--peer-cert-file`).
    pub cert_file: PathBuf,
    /// Private key (`--key-file` / `--peer-key-file`).
    pub key_file: PathBuf,
    /// CA bundle that client certificates (and, for peers, the other
    /// members' server certificates) must chain to (`--trusted-ca-file` /
    /// `--peer-trusted-ca-file`).
    pub trusted_ca_file: Option<PathBuf>,
    /// Require a client certificate signed by the trusted CA
    /// (`--client-cert-auth` / `--peer-client-cert-auth`).
    pub client_cert_auth: bool,
}

fn read_pem(flag: &str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::InvalidArgument(format!("{flag}: cannot read {}: {e}", path.display())))
}

impl TlsFiles {
    /// The server side: our certificate, and the CA that client
    /// certificates must chain to (required with `client_cert_auth`;
    /// without it a client may present none, but one it presents must
    /// verify). The caller sets the ALPN protocols.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for unreadable or malformed files or a
    /// missing CA.
    pub fn server_config(&self, prefix: &str) -> Result<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let bad = |flag: &str, e: &dyn std::fmt::Display| Error::InvalidArgument(format!("--{prefix}{flag}: {e}"));
        let certs = |flag: &str, path: &std::path::Path| -> Result<Vec<CertificateDer<'static>>> {
            let pem = read_pem(&format!("--{prefix}{flag}"), path)?;
            let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem).collect::<std::result::Result<_, _>>().map_err(|e| bad(flag, &e))?;
            if certs.is_empty() {
                return Err(bad(flag, &format!("no certificate in {}", path.display())));
            }
            Ok(certs)
        };
        let chain = certs("cert-file", &self.cert_file)?;
        let key = PrivateKeyDer::from_pem_slice(&read_pem(&format!("--{prefix}key-file"), &self.key_file)?).map_err(|e| bad("key-file", &e))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| bad("cert-file", &e))?;
        let builder = match &self.trusted_ca_file {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certs("trusted-ca-file", ca)? {
                    roots.add(c).map_err(|e| bad("trusted-ca-file", &e))?;
                }
                let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                if !self.client_cert_auth {
                    verifier = verifier.allow_unauthenticated();
                }
                builder.with_client_cert_verifier(verifier.build().map_err(|e| bad("trusted-ca-file", &e))?)
            }
            None if self.client_cert_auth => {
                return Err(Error::InvalidArgument(format!("--{prefix}client-cert-auth needs --{prefix}trusted-ca-file")));
            }
            None => builder.with_no_client_auth(),
        };
        builder.with_single_cert(chain, key).map_err(|e| bad("key-file", &e))
    }

    /// The client side, for dialling other members: trust the CA, and show
    /// our certificate (needed when peers require client certificates).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for unreadable files or a missing CA.
    pub fn client_config(&self, prefix: &str) -> Result<tonic::transport::ClientTlsConfig> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let ca = self.trusted_ca_file.as_ref().ok_or_else(|| Error::InvalidArgument(format!("https peer URLs need --{prefix}trusted-ca-file to verify the other members")))?;
        let ca = read_pem(&format!("--{prefix}trusted-ca-file"), ca)?;
        let cert = read_pem(&format!("--{prefix}cert-file"), &self.cert_file)?;
        let key = read_pem(&format!("--{prefix}key-file"), &self.key_file)?;
        Ok(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)).identity(Identity::from_pem(cert, key)))
    }
}

/// File in the data dir that marks a member removed from its cluster.
const REMOVED_MARKER: &str = "removed";

/// Marks the data dir of a member that was removed from its cluster, so
/// that it refuses to start again (etcd's removed member does too).
///
/// # Errors
/// [`Error::Internal`] if the marker cannot be written.
pub fn mark_removed(data_dir: &std::path::Path) -> Result<()> {
    std::fs::write(data_dir.join(REMOVED_MARKER), crate::raft::network::REMOVED_MESSAGE).map_err(Error::internal)
}

/// A running member.
pub struct NodeHandle {
    /// The first bound TCP client address (the unspecified address
    /// `0.0.0.0:0` if every client URL is a unix socket).
    pub client_addr: SocketAddr,
    /// Every bound TCP client address, in flag order.
    pub client_addrs: Vec<SocketAddr>,
    /// Every client URL served, in flag order, with the port bound for
    /// port 0 (`unix://` URLs as given).
    pub client_urls: Vec<String>,
    /// The socket files of `unix://` client URLs; the process removes them
    /// when it stops (Go's listener does so when closed).
    pub unix_sockets: Vec<PathBuf>,
    /// Every metrics URL served (`--listen-metrics-urls`), with the port
    /// bound for port 0.
    pub metrics_urls: Vec<String>,
    /// The bound peer address.
    pub peer_addr: SocketAddr,
    /// The Raft member.
    pub node: RaftNode,
    /// Shared service context.
    pub ctx: server::Ctx,
    /// Becomes true once this member has been removed from the cluster;
    /// the process should then stop (etcd's removed member shuts down).
    pub removed: tokio::sync::watch::Receiver<bool>,
}

impl NodeHandle {
    /// Stops the member as etcd stops a server ([`RaftNode::stop`]). The
    /// client and peer ports keep accepting until the process exits;
    /// requests that need Raft then fail with `etcdserver: server stopped`.
    pub async fn stop(&self) {
        self.node.stop().await;
    }
}

/// What a member joining a running cluster (`--initial-cluster-state
/// existing`) learns from a peer.
struct Joined {
    id: u64,
    cluster_id: u64,
    members: BTreeMap<u64, Member>,
}

/// Asks the other members named in `--initial-cluster` for the cluster's
/// members and finds this member among them by its peer URL (it must have
/// been added with MemberAdd first, as in etcd).
///
/// # Errors
/// [`Error::InvalidArgument`] when no peer answers or this member's peer URL
/// is not in the cluster.
async fn discover(cfg: &Config, my_peer_url: &str, tls: Option<PeerTls>) -> Result<Joined> {
    let mut last_err = None;
    for (name, url) in &cfg.initial_cluster {
        if *name == cfg.name || url == my_peer_url {
            continue;
        }
        match PeerClients::members_at(url, tls.clone()).await {
            Ok((cluster_id, list)) => {
                let Some(id) = list.iter().find(|(_, (m, _))| m.peer_urls.iter().any(|u| u == my_peer_url)).map(|(id, _)| *id) else {
                    return Err(Error::InvalidArgument(format!(
                        "error validating peerURLs: member with peer URL {my_peer_url} has not been added to the cluster (add it with `etcdctl member add` first)"
                    )));
                };
                let members = list.into_iter().map(|(id, (m, _))| (id, m)).collect();
                return Ok(Joined { id, cluster_id, members });
            }
            Err(e) => last_err = Some(format!("{url}: {e}")),
        }
    }
    Err(Error::InvalidArgument(format!("cannot fetch cluster info from peer urls in --initial-cluster: {}", last_err.unwrap_or_else(|| "no other member listed".into()))))
}

/// A member ID derived from the name, peer URLs and cluster token, so every
/// member computes the same IDs from `--initial-cluster` (etcd derives its
/// IDs from peer URLs and the token the same way).
pub fn member_id(name: &str, peer_url: &str, token: &str) -> u64 {
    let d = Sha256::digest(format!("{name}\n{peer_url}\n{token}").as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b).max(1)
}

fn host_port(url: &str) -> Result<String> {
    let u = url::Url::parse(url).map_err(|e| Error::InvalidArgument(format!("bad URL {url:?}: {e}")))?;
    let host = u.host_str().ok_or_else(|| Error::InvalidArgument(format!("URL without host: {url}")))?;
    let port = u.port_or_known_default().ok_or_else(|| Error::InvalidArgument(format!("URL without port: {url}")))?;
    Ok(format!("{host}:{port}"))
}

/// An advertised URL with port 0 means "the port I bound": substitute it.
fn with_bound_port(url: &str, bound: SocketAddr) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.port() == Some(0) => {
            let _ = u.set_port(Some(bound.port()));
            u.as_str().trim_end_matches('/').to_string()
        }
        _ => url.to_string(),
    }
}

/// The minimal lease TTL in seconds: 1.5 election timeouts, rounded up
/// (etcd `minTTL`).
fn min_lease_ttl(election: Duration) -> i64 {
    let ms = election.as_millis() as i64 * 3 / 2;
    (ms + 999) / 1000
}

/// Checks URLs and cluster flags as etcd does before starting.
fn validate(cfg: &Config) -> Result<()> {
    let check = |flag: &str, url: &str| -> Result<()> {
        let u = url::Url::parse(url).map_err(|e| Error::InvalidArgument(format!("{flag}: invalid URL {url:?}: {e}")))?;
        let peer = flag.contains("peer") || flag == "--initial-cluster";
        let (tls, needs) = if peer {
            (cfg.peer_tls.is_some() || cfg.peer_auto_tls, "--peer-cert-file and --peer-key-file (or --peer-auto-tls)")
        } else {
            (cfg.client_tls.is_some() || cfg.client_auto_tls, "--cert-file and --key-file (or --auto-tls)")
        };
        // etcd serves client URLs on unix sockets too; peer traffic and
        // metrics only on TCP here.
        let unix_ok = flag.contains("client");
        match u.scheme() {
            "http" => {}
            "unix" if unix_ok => {}
            "https" | "unixs" if tls && (unix_ok || u.scheme() == "https") => {}
            "https" => return Err(Error::InvalidArgument(format!("{flag}: {url}: an https URL needs {needs}"))),
            "unixs" if unix_ok => return Err(Error::InvalidArgument(format!("{flag}: {url}: a unixs URL needs {needs}"))),
            "unix" | "unixs" => return Err(Error::InvalidArgument(format!("{flag}: URL scheme must be http or https (raftstore serves only client URLs on unix sockets): {url}"))),
            _ if unix_ok => return Err(Error::InvalidArgument(format!("{flag}: URL scheme must be http, https, unix, or unixs: {url}"))),
            _ => return Err(Error::InvalidArgument(format!("{flag}: URL scheme must be http or https: {url}"))),
        }
        // A unix URL names its socket file by its `host:port` (etcd's
        // `types.NewURLs` checks every URL so).
        if u.scheme().starts_with("unix") {
            if u.host_str().is_none_or(str::is_empty) || u.port().is_none() {
                return Err(Error::InvalidArgument(format!("{flag}: URL address does not have the form \"host:port\": {url}")));
            }
            if !u.path().is_empty() {
                return Err(Error::InvalidArgument(format!("{flag}: URL must not contain a path: {url}")));
            }
        }
        if u.host_str().is_none_or(str::is_empty) {
            return Err(Error::InvalidArgument(format!("{flag}: URL without a host: {url}")));
        }
        Ok(())
    };
    for u in &cfg.listen_client_urls {
        check("--listen-client-urls", u)?;
    }
    for u in &cfg.listen_metrics_urls {
        check("--listen-metrics-urls", u)?;
    }
    for u in &cfg.listen_peer_urls {
        check("--listen-peer-urls", u)?;
    }
    for u in &cfg.advertise_client_urls {
        check("--advertise-client-urls", u)?;
    }
    for u in &cfg.initial_advertise_peer_urls {
        check("--initial-advertise-peer-urls", u)?;
    }
    for (_, u) in &cfg.initial_cluster {
        check("--initial-cluster", u)?;
    }
    if !cfg.initial_cluster.is_empty() {
        // Two members on one URL would make this member talk to itself under
        // another ID (etcd refuses it the same way).
        let mut seen = HashSet::new();
        if cfg.initial_cluster.iter().any(|(_, u)| !seen.insert(u.as_str())) {
            let ic = cfg.initial_cluster.iter().map(|(n, u)| format!("{n}={u}")).collect::<Vec<_>>().join(",");
            return Err(Error::InvalidArgument(format!("initial cluster {ic} has duplicate url")));
        }
        let mine: Vec<&String> = cfg.initial_cluster.iter().filter(|(n, _)| *n == cfg.name).map(|(_, u)| u).collect();
        if mine.is_empty() {
            return Err(Error::InvalidArgument(format!("--initial-cluster has no member named {:?} (--name)", cfg.name)));
        }
        // etcd compares the two URL sets, so each must hold the other.
        let adv = &cfg.initial_advertise_peer_urls;
        let differs = !adv.is_empty() && (mine.len() != adv.len() || adv.iter().any(|a| !mine.contains(&a)));
        if differs {
            return Err(Error::InvalidArgument(format!(
                "--initial-cluster has {}={} but missing from --initial-advertise-peer-urls={}",
                cfg.name,
                mine.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","),
                adv.join(",")
            )));
        }
        // etcd allows several peer URLs per member (`a=URL1,a=URL2`); a
        // member here has exactly one.
        let mut names = HashSet::new();
        if let Some((n, _)) = cfg.initial_cluster.iter().find(|(n, _)| !names.insert(n.as_str())) {
            return Err(Error::InvalidArgument(format!("--initial-cluster: member {n:?} has more than one peer URL, which raftstore does not support")));
        }
    }
    if cfg.max_request_bytes == 0 {
        return Err(Error::InvalidArgument("--max-request-bytes must be positive".into()));
    }
    if (cfg.client_auto_tls || cfg.peer_auto_tls) && cfg.self_signed_cert_validity == 0 {
        return Err(Error::InvalidArgument("--self-signed-cert-validity is invalid, it should be greater than 0".into()));
    }
    Ok(())
}

/// Returns the member and cluster IDs stored in the data dir, storing the
/// given ones on first start.
fn persisted_ids(db: &rocksdb::DB, id: u64, cluster_id: u64) -> Result<(u64, u64)> {
    use crate::storage::keys::{self, MetaKey};
    let cf = crate::storage::cf(db, keys::CF_RAFT_STATE)?;
    match (db.get_cf(cf, keys::MemberId::KEY)?, db.get_cf(cf, keys::ClusterId::KEY)?) {
        (Some(m), Some(c)) => Ok((keys::decode_u64(&m)?, keys::decode_u64(&c)?)),
        _ => {
            let mut batch = rocksdb::WriteBatch::default();
            batch.put_cf(cf, keys::MemberId::KEY, id.to_be_bytes());
            batch.put_cf(cf, keys::ClusterId::KEY, cluster_id.to_be_bytes());
            crate::storage::write_durable(db, batch)?;
            Ok((id, cluster_id))
        }
    }
}

/// A bound client listener.
enum Bound {
    Tcp(TcpListener),
    Unix(tokio::net::UnixListener),
}

/// One `--listen-client-urls` entry, bound.
struct ClientListener {
    socket: Bound,
    /// Serves TLS (`https://`, `unixs://`).
    tls: bool,
    /// The URL served, with the bound port for port 0.
    url: String,
    /// The bound TCP address.
    addr: Option<SocketAddr>,
    /// The socket file of a unix URL.
    socket_file: Option<PathBuf>,
}

impl ClientListener {
    /// Binds `url`. A `unix://HOST:PORT` URL is a socket file named
    /// `HOST:PORT` in the working directory (etcd listens on `u.Host`); a
    /// file left there by a process that did not stop cleanly makes the
    /// bind fail, as with etcd.
    async fn bind(url: &str) -> Result<ClientListener> {
        let u = url::Url::parse(url).map_err(|e| Error::InvalidArgument(format!("bad URL {url:?}: {e}")))?;
        let tls = matches!(u.scheme(), "https" | "unixs");
        if u.scheme().starts_with("unix") {
            let file = PathBuf::from(host_port(url)?);
            let l = tokio::net::UnixListener::bind(&file).map_err(|e| Error::InvalidArgument(format!("listen unix {}: {e}", file.display())))?;
            return Ok(ClientListener { socket: Bound::Unix(l), tls, url: url.to_string(), addr: None, socket_file: Some(file) });
        }
        let addr = host_port(url)?;
        let l = TcpListener::bind(&addr).await.map_err(|e| Error::InvalidArgument(format!("listen tcp {addr}: {e}")))?;
        let bound = l.local_addr().map_err(Error::internal)?;
        Ok(ClientListener { socket: Bound::Tcp(l), tls, url: format!("{}://{bound}", u.scheme()), addr: Some(bound), socket_file: None })
    }
}

/// File in the data dir that names the directory RocksDB's WAL was last
/// kept in, when that is not `db` itself (`--wal-dir`).
const WAL_DIR_MARKER: &str = "wal-dir";

/// Creates `--wal-dir` and returns its absolute path, so that the path
/// recorded in the data dir means the same from any working directory.
fn prepare_wal_dir(dir: &std::path::Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::InvalidArgument(format!("cannot create WAL directory {}: {e}", dir.display())))?;
    std::fs::canonicalize(dir).map_err(|e| Error::InvalidArgument(format!("cannot create WAL directory {}: {e}", dir.display())))
}

/// Opens the store in `db_dir` with its WAL in `wal_dir` (or in `db_dir`).
///
/// RocksDB replays only the WAL in the directory it is opened with. When
/// an earlier start kept the WAL elsewhere (`--wal-dir` added, changed or
/// dropped since), the store is first opened with the old directory, which
/// replays the writes only its WAL holds, and flushed, so that nothing
/// needs that WAL any more; then the new directory is recorded and the
/// store opened with it.
///
/// # Errors
/// [`Error::InvalidArgument`] if the old WAL directory is gone (its writes
/// would be lost); [`Error::Internal`] if RocksDB fails.
fn open_db(dir: &std::path::Path, db_dir: &std::path::Path, wal_dir: Option<&std::path::Path>) -> Result<crate::storage::Db> {
    use std::os::unix::ffi::OsStrExt;
    let marker = dir.join(WAL_DIR_MARKER);
    let recorded = match std::fs::read(&marker) {
        Ok(b) => Some(PathBuf::from(std::ffi::OsStr::from_bytes(&b))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::InvalidArgument(format!("cannot read {}: {e}", marker.display()))),
    };
    let wanted = wal_dir.filter(|w| *w != db_dir);
    if recorded.as_deref() != wanted {
        if db_dir.join("CURRENT").exists() {
            if let Some(old) = &recorded {
                if !old.is_dir() {
                    return Err(Error::InvalidArgument(format!("the write-ahead log of this data dir was kept in {} (--wal-dir), which is gone", old.display())));
                }
            }
            let old = crate::storage::open_with_wal(db_dir, recorded.as_deref())?;
            crate::storage::flush_all(&old)?;
            drop(old);
        }
        match wanted {
            Some(w) => {
                std::fs::write(&marker, w.as_os_str().as_bytes()).map_err(Error::internal)?;
                std::fs::File::open(&marker).and_then(|f| f.sync_all()).map_err(Error::internal)?;
            }
            None => std::fs::remove_file(&marker).map_err(Error::internal)?,
        }
        std::fs::File::open(dir).and_then(|f| f.sync_all()).map_err(Error::internal)?;
    }
    crate::storage::open_with_wal(db_dir, wanted)
}

/// Starts a member and returns once it serves clients.
///
/// # Errors
/// [`Error::InvalidArgument`] for bad flags; [`Error::Internal`] if the data
/// dir cannot be opened or a port cannot be bound.
pub async fn start(cfg: Config) -> Result<NodeHandle> {
    // Flags are checked and ports bound before the data dir is touched, so a
    // bad flag leaves nothing behind (as etcd).
    validate(&cfg)?;
    let tokens = crate::auth::TokenProvider::from_flag(&cfg.auth_token, cfg.auth_token_ttl)?;
    let mut client_ls = Vec::new();
    for url in &cfg.listen_client_urls {
        client_ls.push(ClientListener::bind(url).await?);
    }
    let peer_listen = cfg.listen_peer_urls.first().ok_or_else(|| Error::InvalidArgument("--listen-peer-urls is empty".into()))?;
    let peer_bind = host_port(peer_listen)?;
    let peer_l = TcpListener::bind(&peer_bind).await.map_err(|e| Error::InvalidArgument(format!("listen tcp {peer_bind}: {e}")))?;
    let mut metrics_ls = Vec::new();
    for url in &cfg.listen_metrics_urls {
        let addr = host_port(url)?;
        let l = TcpListener::bind(&addr).await.map_err(|e| Error::InvalidArgument(format!("listen tcp {addr}: {e}")))?;
        let bound = l.local_addr().map_err(Error::internal)?;
        metrics_ls.push((l, url.starts_with("https:"), with_bound_port(url, bound)));
    }
    if client_ls.is_empty() {
        return Err(Error::InvalidArgument("--listen-client-urls is empty".into()));
    }
    let client_addrs: Vec<SocketAddr> = client_ls.iter().filter_map(|l| l.addr).collect();
    let client_addr = client_addrs.first().copied().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    let client_urls: Vec<String> = client_ls.iter().map(|l| l.url.clone()).collect();
    let unix_sockets: Vec<PathBuf> = client_ls.iter().filter_map(|l| l.socket_file.clone()).collect();
    let metrics_urls: Vec<String> = metrics_ls.iter().map(|(_, _, u)| u.clone()).collect();
    let peer_addr = peer_l.local_addr().map_err(Error::internal)?;

    let dir = &cfg.data_dir;
    if dir.join(REMOVED_MARKER).exists() {
        return Err(Error::InvalidArgument(format!("{}: {}", crate::raft::network::REMOVED_MESSAGE, dir.display())));
    }
    // Creating the data dir and then `db` here turns a file (or a dangling
    // symlink) in their place into a plain OS error naming the path at
    // fault, instead of RocksDB's debug-formatted one.
    let create_data_dir = || std::fs::create_dir_all(dir).map_err(|e| Error::InvalidArgument(format!("cannot create data directory {}: {e}", dir.display())));
    // --auto-tls and --peer-auto-tls: certificates under the data dir,
    // made before anything is served (as etcd).
    let client_tls = match &cfg.client_tls {
        Some(t) => Some(t.clone()),
        None if cfg.client_auto_tls => {
            create_data_dir()?;
            let hosts: Vec<String> = cfg.listen_client_urls.iter().filter_map(|u| host_port(u).ok()).collect();
            let c = crate::tls::self_cert(&dir.join("fixtures").join("client"), &hosts, cfg.self_signed_cert_validity, false)?;
            Some(TlsFiles { cert_file: c.cert_file, key_file: c.key_file, trusted_ca_file: None, client_cert_auth: false })
        }
        None => None,
    };
    let peer_self_cert = match &cfg.peer_tls {
        None if cfg.peer_auto_tls => {
            create_data_dir()?;
            let hosts: Vec<String> = cfg.listen_peer_urls.iter().filter_map(|u| host_port(u).ok()).collect();
            Some(crate::tls::self_cert(&dir.join("fixtures").join("peer"), &hosts, cfg.self_signed_cert_validity, true)?)
        }
        _ => None,
    };
    if cfg.client_auto_tls && cfg.client_tls.is_some() {
        tracing::warn!("ignoring client auto TLS since certs given");
    }
    if cfg.peer_auto_tls && cfg.peer_tls.is_some() {
        tracing::warn!("ignoring peer auto TLS since certs given");
    }
    let peer_tls = match &peer_self_cert {
        Some(c) => Some(TlsFiles { cert_file: c.cert_file.clone(), key_file: c.key_file.clone(), trusted_ca_file: None, client_cert_auth: false }),
        None => cfg.peer_tls.clone(),
    };

    // ALPN: gRPC is HTTP/2; the client port also answers HTTP/1.1 (health,
    // metrics, version). A listener serves TLS when its URL is https (or
    // unixs): etcd serves an http URL in the clear even with certificates.
    let acceptor = |mut tls: rustls::ServerConfig, alpn: &[&[u8]]| {
        tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(tls))
    };
    let client_tls_acceptor = client_tls.as_ref().map(|t| t.server_config("")).transpose()?.map(|c| acceptor(c, &[b"h2", b"http/1.1"]));
    let peer_server_tls = peer_tls.as_ref().filter(|_| peer_listen.starts_with("https:")).map(|t| t.server_config("peer-")).transpose()?.map(|c| acceptor(c, &[b"h2"]));
    let peer_client_tls = match (&peer_self_cert, &cfg.peer_tls) {
        (Some(c), _) => Some(PeerTls::SelfSigned(Arc::new(crate::tls::insecure_client_config(&c.cert_file, &c.key_file)?))),
        (None, Some(t)) if t.trusted_ca_file.is_some() => Some(PeerTls::Verified(t.client_config("peer-")?)),
        _ => None,
    };
    let peer_scheme = if peer_listen.starts_with("https:") { "https" } else { "http" };

    let fresh = !dir.join("db").exists();
    let my_peer_url = cfg.initial_advertise_peer_urls.first().map(|u| with_bound_port(u, peer_addr)).unwrap_or_else(|| format!("{peer_scheme}://{peer_addr}"));
    // A new member of a running cluster learns its ID from the others
    // before it touches the data dir.
    let joined = if fresh && cfg.initial_cluster_state == "existing" { Some(discover(&cfg, &my_peer_url, peer_client_tls.clone()).await?) } else { None };
    create_data_dir()?;
    let db_dir = dir.join("db");
    std::fs::create_dir_all(&db_dir).map_err(|e| Error::InvalidArgument(format!("cannot create data directory {}: {e}", db_dir.display())))?;
    let wal_dir = cfg.wal_dir.as_deref().map(prepare_wal_dir).transpose()?;
    let db = open_db(dir, &db_dir, wal_dir.as_deref()).map_err(|e| {
        let e = match e {
            Error::Internal(m) => m,
            other => other.to_string(),
        };
        Error::InvalidArgument(format!("cannot open data directory {}: {e}", dir.display()))
    })?;
    crate::storage::presize_wal(&db, wal_dir.as_deref());
    let store = Arc::new(MvccStore::open(db.clone(), min_lease_ttl(cfg.election))?);
    let hub = Arc::new(WatchHub::new(store.current_revision()));
    let snap_root = dir.join("snapshots");
    let auth = Arc::new(crate::auth::AuthStore::open(db.clone(), tokens, cfg.bcrypt_cost)?);
    let sm = StateMachine::open(store.clone(), hub.clone(), snap_root.clone()).map_err(Error::internal)?.with_auth(auth.clone());
    let log = LogStore::new(db.clone());
    let inline_sync = log.inline_sync_switch();

    let my_client_urls = if cfg.advertise_client_urls.is_empty() {
        client_urls.iter().take(1).cloned().collect()
    } else if client_addrs.is_empty() {
        cfg.advertise_client_urls.clone()
    } else {
        cfg.advertise_client_urls.iter().zip(client_addrs.iter().cycle()).map(|(u, a)| with_bound_port(u, *a)).collect()
    };
    let cluster: Vec<(String, String)> = if cfg.initial_cluster.is_empty() { vec![(cfg.name.clone(), my_peer_url.clone())] } else { cfg.initial_cluster.clone() };
    let token = &cfg.initial_cluster_token;
    let mut members: BTreeMap<u64, Member> = BTreeMap::new();
    let mut urls: HashMap<u64, String> = HashMap::new();
    let mut my_id = None;
    for (name, url) in &cluster {
        let id = member_id(name, url, token);
        let (peer_url, client_urls) = if *name == cfg.name { (with_bound_port(url, peer_addr), my_client_urls.clone()) } else { (url.clone(), Vec::new()) };
        members.insert(id, Member { name: name.clone(), peer_urls: vec![peer_url.clone()], client_urls });
        urls.insert(id, peer_url);
        if *name == cfg.name {
            my_id = Some(id);
        }
    }
    let id = my_id.ok_or_else(|| Error::InvalidArgument(format!("--initial-cluster has no member named {:?}", cfg.name)))?;
    let mut ids: Vec<u64> = members.keys().copied().collect();
    ids.sort_unstable();
    let cluster_id = {
        let d = Sha256::digest(format!("{ids:?}{token}").as_bytes());
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[..8]);
        u64::from_be_bytes(b)
    };
    let (id, cluster_id) = match joined {
        Some(j) => {
            members = j.members;
            urls = members.iter().filter_map(|(id, m)| m.peer_urls.first().map(|u| (*id, u.clone()))).collect();
            (j.id, j.cluster_id)
        }
        None => (id, cluster_id),
    };
    // IDs are fixed at first start (etcd keeps them in its WAL metadata).
    let (id, cluster_id) = persisted_ids(&db, id, cluster_id)?;

    let peers = Arc::new(PeerClients::new(urls, peer_client_tls));
    let timing = crate::raft::Timing { heartbeat: cfg.heartbeat, election: cfg.election };
    // The Raft core and the state machine run on their own single-threaded
    // runtime: their many small hand-offs (API channel, log flush
    // notification, apply, responder) stay on one OS thread instead of
    // waking threads of the shared pool.
    let raft = {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (net, name, count, keep) = (NetworkFactory::new(peers.clone()), token.clone(), cfg.snapshot_count, cfg.snapshot_catchup_entries);
        std::thread::Builder::new()
            .name("raft".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(Error::internal(e)));
                        return;
                    }
                };
                let handle = rt.handle().clone();
                rt.block_on(async move {
                    let r = crate::raft::create(id, &name, timing, count, keep, net, log, sm).await;
                    let _ = tx.send(r.map(|raft| (raft, handle)));
                    std::future::pending::<()>().await;
                });
            })
            .map_err(Error::internal)?;
        rx.await.map_err(|_| Error::internal("raft thread exited"))??
    };
    let (raft, raft_rt) = raft;
    let removed = peers.removed();
    let node = RaftNode {
        raft: raft.clone(),
        id,
        request_timeout: Duration::from_secs(5) + cfg.election * 2,
        peers,
        membership_lock: Arc::new(tokio::sync::Mutex::new(())),
        cluster_id,
        removed_ids: Arc::default(),
        election_timeout: cfg.election,
        leader_contact: Arc::default(),
        rounds: Arc::default(),
    };
    tokio::spawn(node.clone().watch_membership());
    tokio::spawn(node.clone().drive_inline_sync(inline_sync));

    tokio::spawn(node.clone().count_leader_changes());

    // Peer transport first, so that members can reach each other during
    // the first election.
    let lessor = Arc::new(Lessor::default());
    let transport = TransportService::new(node.clone(), snap_root, store.clone(), lessor.clone());
    let peer_service = tonic::service::Routes::new(RaftTransportServer::new(transport).max_decoding_message_size(usize::MAX).max_encoding_message_size(usize::MAX)).prepare();
    let peer_port = crate::serving::Port { name: "peer", tls: peer_server_tls, http1: false, max_streams: crate::serving::PEER_MAX_STREAMS, limits: cfg.serving.clone() };
    // The peer server runs on the Raft thread too: a follower's
    // replication stream then reaches its Raft core, and the answer leaves,
    // without waking another thread (the listener is re-registered there,
    // and each connection's tasks are spawned there).
    let peer_l = peer_l.into_std().map_err(Error::internal)?;
    raft_rt.spawn(async move {
        match TcpListener::from_std(peer_l) {
            Ok(l) => crate::serving::serve(l, peer_port, peer_service).await,
            Err(e) => tracing::error!("peer listener: {e}"),
        }
    });

    if cfg.initial_cluster_state == "new" {
        node.bootstrap(members).await?;
    }

    let ctx = Arc::new(Context {
        node: node.clone(),
        store: store.clone(),
        hub,
        lessor,
        cluster_id,
        member_id: id,
        max_request_bytes: cfg.max_request_bytes,
        max_txn_ops: cfg.max_txn_ops,
        quota_backend_bytes: server::quota::from_flag(cfg.quota_backend_bytes),
        progress_notify_interval: cfg.progress_notify_interval,
        data_dir: cfg.data_dir.clone(),
        auth,
        client_cert_auth: client_tls.as_ref().is_some_and(|t| t.client_cert_auth),
    });
    tokio::spawn(server::lease::expiry_loop(ctx.clone()));
    // Publish this start's name and client URLs (etcd's publish step).
    let publish = proto::etcdserverpb::Member { id, name: cfg.name.clone(), peer_ur_ls: Vec::new(), client_ur_ls: my_client_urls.clone(), is_learner: false };
    let publisher = node.clone();
    tokio::spawn(async move {
        for _ in 0..60 {
            match publisher.propose(crate::command::Command::PublishMember(publish.clone())).await {
                Ok(_) => return,
                Err(e) => tracing::debug!("publishing member attributes: {e}"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tracing::warn!("could not publish member attributes");
    });
    if let Some(ac) = cfg.auto_compaction.clone() {
        tokio::spawn(crate::compactor::run(ctx.clone(), ac));
    }

    // gRPC refuses messages above this before our own size check runs
    // (etcd: max-request-bytes + 512 KiB of overhead).
    let grpc_limit = cfg.max_request_bytes + 512 * 1024;
    let client_service = crate::server::http::ClientHttpLayer::new(ctx.clone()).layer(
        tonic::service::Routes::new(server::kv_txn::KvServer::new(server::kv::KvService::new(ctx.clone()), grpc_limit))
            .add_service(WatchServer::new(server::watch::WatchService::new(ctx.clone())).max_decoding_message_size(grpc_limit).max_encoding_message_size(usize::MAX))
            .add_service(LeaseServer::new(server::lease::LeaseService::new(ctx.clone())).max_decoding_message_size(grpc_limit))
            .add_service(MaintenanceServer::new(server::maintenance::MaintenanceService::new(ctx.clone())).max_decoding_message_size(grpc_limit).max_encoding_message_size(usize::MAX))
            .add_service(ClusterServer::new(server::cluster::ClusterService::new(ctx.clone())).max_decoding_message_size(grpc_limit))
            .add_service(LockServer::new(server::lock::LockService::new(ctx.clone())).max_decoding_message_size(grpc_limit))
            .add_service(ElectionServer::new(server::election::ElectionService::new(ctx.clone())).max_decoding_message_size(grpc_limit))
            .add_service(AuthServer::new(server::auth::AuthService::new(ctx.clone())).max_decoding_message_size(grpc_limit))
            .prepare(),
    );
    let client_port = crate::serving::Port { name: "client", tls: None, http1: true, max_streams: cfg.serving.max_concurrent_streams, limits: cfg.serving.clone() };
    for l in client_ls {
        let port = crate::serving::Port { tls: if l.tls { client_tls_acceptor.clone() } else { None }, ..client_port.clone() };
        match l.socket {
            Bound::Tcp(tcp) => tokio::spawn(crate::serving::serve(tcp, port, client_service.clone())),
            Bound::Unix(unix) => tokio::spawn(crate::serving::serve(unix, port, client_service.clone())),
        };
    }
    let metrics_service = crate::server::http::MetricsService::new(ctx.clone());
    for (l, tls, url) in metrics_ls {
        let port = crate::serving::Port { name: "metrics", tls: if tls { client_tls_acceptor.clone() } else { None }, ..client_port.clone() };
        tracing::info!("serving metrics on {url}");
        tokio::spawn(crate::serving::serve(l, port, metrics_service.clone()));
    }

    Ok(NodeHandle { client_addr, client_addrs, client_urls, unix_sockets, metrics_urls, peer_addr, node, ctx, removed })
}
