//! `raftstore`: an etcd v3-compatible server. Flags follow etcd's names.
//!
//! ```text
//! raftstore --name n1 --data-dir /var/lib/raftstore \
//!   --listen-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380
//! raftstore snapshot save backup.db --endpoints https://etcd-0:2379 --cacert ca.crt --cert c.crt --key c.key
//! raftstore snapshot restore backup.db --data-dir /var/lib/new
//! raftstore --config-file /etc/raftstore.yaml
//! ```
//!
//! Flags are written as etcd's are: `--name x`, `--name=x` or `-name x`,
//! and a boolean flag as `--auto-tls` or `--auto-tls=false`; a bad flag is
//! refused in Go's words (see [`usage`]).

mod config_file;
mod logging;
mod usage;

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use raftstore::compactor::AutoCompaction;
use raftstore::node::{self, Config, TlsFiles};

/// mimalloc instead of glibc malloc: under a write load glibc's
/// `malloc`/`free` took ~15% of the Raft thread (perf, 256 clients, three
/// members); entries, gRPC buffers and responses are many small
/// short-lived allocations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "raftstore", version, about = "etcd v3-compatible key-value store on RocksDB and openraft", args_conflicts_with_subcommands = true, args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    serve: Serve,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Snapshot tools.
    Snapshot {
        #[command(subcommand)]
        action: SnapshotCmd,
    },
}

#[derive(Subcommand, Debug)]
enum SnapshotCmd {
    /// Save a snapshot of a running etcd (or raftstore) to FILE, read
    /// through its client API: every key with its revisions, and the
    /// leases. `snapshot restore` turns it into a raftstore data dir with
    /// the same keys and revisions, compacted at the revision read.
    Save {
        /// The snapshot file to write.
        file: PathBuf,
        /// Client URLs of the server to read (comma-separated).
        #[arg(long, default_value = "http://127.0.0.1:2379", value_delimiter = ',')]
        endpoints: Vec<String>,
        /// CA bundle (PEM) that verifies an `https://` server.
        #[arg(long)]
        cacert: Option<PathBuf>,
        /// Client certificate (PEM) for a server that requires one.
        #[arg(long)]
        cert: Option<PathBuf>,
        /// Key (PEM) of `--cert`.
        #[arg(long)]
        key: Option<PathBuf>,
    },
    /// Restore a new data dir from a snapshot: etcd's format, as `etcdctl
    /// snapshot save` writes against etcd or raftstore, or raftstore's own,
    /// as `raftstore snapshot save` writes.
    Restore {
        /// The snapshot file.
        file: PathBuf,
        /// The data dir to create (must not exist).
        #[arg(long = "data-dir")]
        data_dir: PathBuf,
        /// Take an etcd db that has no SHA-256 after it (one copied from an
        /// etcd data dir's `member/snap/db`), as etcdctl's flag of the name.
        #[arg(long = "skip-hash-check")]
        skip_hash_check: bool,
        /// Accepted for etcdutl compatibility; the member's name is given when it starts.
        #[arg(long)]
        name: Option<String>,
        /// Accepted for etcdutl compatibility.
        #[arg(long = "initial-cluster")]
        initial_cluster: Option<String>,
        /// Accepted for etcdutl compatibility.
        #[arg(long = "initial-advertise-peer-urls")]
        initial_advertise_peer_urls: Option<String>,
        /// Accepted for etcdutl compatibility.
        #[arg(long = "initial-cluster-token")]
        initial_cluster_token: Option<String>,
    },
}

/// The server's flags. As with etcd, each can also come from an
/// environment variable named `ETCD_` plus the flag in upper case with `_`
/// for `-` (`--data-dir` is `ETCD_DATA_DIR`); a flag on the command line
/// wins over its variable. With `--config-file`, the file alone decides
/// (see [`config_file`]).
#[derive(Args, Debug)]
struct Serve {
    /// Path to the server configuration file (etcd's YAML, keys named as
    /// the flags). Note that if a configuration file is provided, other
    /// command line flags and environment variables will be ignored.
    #[arg(long = "config-file", env = "ETCD_CONFIG_FILE")]
    config_file: Option<PathBuf>,
    /// Human-readable name for this member.
    #[arg(long, env = "ETCD_NAME", default_value = "default")]
    name: String,
    /// Path to the data directory (default: `<name>.raftstore`).
    #[arg(long = "data-dir", env = "ETCD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Path to the dedicated WAL directory. raftstore's Raft log is written
    /// to RocksDB, which syncs every append to its write-ahead log: that log
    /// is kept here instead of in `<data-dir>/db` (the log entries
    /// themselves end up in the database under --data-dir once RocksDB
    /// flushes). The directory is created if missing; a data dir started
    /// with another (or no) --wal-dir before is moved over safely.
    #[arg(long = "wal-dir", env = "ETCD_WAL_DIR")]
    wal_dir: Option<PathBuf>,
    /// URLs to listen on for client traffic (comma-separated; all are
    /// served): `http://`, `https://`, or `unix://HOST:PORT` (`unixs://`
    /// with TLS) for a unix socket file named `HOST:PORT` in the working
    /// directory.
    #[arg(long = "listen-client-urls", env = "ETCD_LISTEN_CLIENT_URLS", default_value = "http://127.0.0.1:2379")]
    listen_client_urls: String,
    /// List of URLs to listen on for the metrics and health endpoints
    /// (`/metrics` and `/health` only; `https://` uses the client TLS).
    #[arg(long = "listen-metrics-urls", env = "ETCD_LISTEN_METRICS_URLS", default_value = "")]
    listen_metrics_urls: String,
    /// Client URLs to advertise to the cluster.
    #[arg(long = "advertise-client-urls", env = "ETCD_ADVERTISE_CLIENT_URLS", default_value = "")]
    advertise_client_urls: String,
    /// URLs to listen on for peer traffic.
    #[arg(long = "listen-peer-urls", env = "ETCD_LISTEN_PEER_URLS", default_value = "http://127.0.0.1:2380")]
    listen_peer_urls: String,
    /// This member's peer URLs to advertise to the rest of the cluster.
    #[arg(long = "initial-advertise-peer-urls", env = "ETCD_INITIAL_ADVERTISE_PEER_URLS", default_value = "")]
    initial_advertise_peer_urls: String,
    /// Initial cluster configuration: `name=peerURL,name=peerURL`.
    #[arg(long = "initial-cluster", env = "ETCD_INITIAL_CLUSTER", default_value = "")]
    initial_cluster: String,
    /// `new` to form a new cluster, `existing` to join one.
    #[arg(long = "initial-cluster-state", env = "ETCD_INITIAL_CLUSTER_STATE", default_value = "new", value_parser = ["new", "existing"])]
    initial_cluster_state: String,
    /// Initial cluster token.
    #[arg(long = "initial-cluster-token", env = "ETCD_INITIAL_CLUSTER_TOKEN", default_value = "etcd-cluster")]
    initial_cluster_token: String,
    /// Maximum client request size in bytes.
    #[arg(long = "max-request-bytes", env = "ETCD_MAX_REQUEST_BYTES", default_value_t = 1_572_864)]
    max_request_bytes: usize,
    /// Maximum number of operations permitted in a transaction (compares,
    /// or the ops of one branch, nested transactions included).
    #[arg(long = "max-txn-ops", env = "ETCD_MAX_TXN_OPS", default_value_t = raftstore::server::kv::MAX_TXN_OPS)]
    max_txn_ops: usize,
    /// Raise the NOSPACE alarm and refuse writes when the database exceeds
    /// this many bytes: 0 for the default (2 GiB), negative for no quota.
    #[arg(long = "quota-backend-bytes", env = "ETCD_QUOTA_BACKEND_BYTES", default_value_t = 0, allow_negative_numbers = true)]
    quota_backend_bytes: i64,
    /// Auto compaction mode: `periodic` or `revision`.
    #[arg(long = "auto-compaction-mode", env = "ETCD_AUTO_COMPACTION_MODE", default_value = "periodic")]
    auto_compaction_mode: String,
    /// Auto compaction retention: a duration or hours (periodic), or a revision count. 0 disables.
    #[arg(long = "auto-compaction-retention", env = "ETCD_AUTO_COMPACTION_RETENTION", default_value = "0")]
    auto_compaction_retention: String,
    /// Heartbeat interval in milliseconds.
    #[arg(long = "heartbeat-interval", env = "ETCD_HEARTBEAT_INTERVAL", default_value_t = 100)]
    heartbeat_interval: u64,
    /// Election timeout in milliseconds.
    #[arg(long = "election-timeout", env = "ETCD_ELECTION_TIMEOUT", default_value_t = 1000)]
    election_timeout: u64,
    /// Interval of watch progress notifications (e.g. `10m`, `500ms`).
    #[arg(long = "experimental-watch-progress-notify-interval", env = "ETCD_EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL", default_value = "10m")]
    progress_notify_interval: String,
    /// Raft log entries between snapshots.
    #[arg(long = "snapshot-count", env = "ETCD_SNAPSHOT_COUNT", default_value_t = 100_000)]
    snapshot_count: u64,
    /// Raft log entries kept after a snapshot so that slow followers can catch up without one.
    #[arg(long = "experimental-snapshot-catchup-entries", env = "ETCD_EXPERIMENTAL_SNAPSHOT_CATCHUP_ENTRIES", default_value_t = 5_000)]
    snapshot_catchup_entries: u64,
    /// Client server TLS certificate file (PEM); serves https client URLs.
    #[arg(long = "cert-file", env = "ETCD_CERT_FILE")]
    cert_file: Option<PathBuf>,
    /// Client server TLS key file (PEM).
    #[arg(long = "key-file", env = "ETCD_KEY_FILE")]
    key_file: Option<PathBuf>,
    /// CA bundle (PEM) that client certificates must chain to.
    #[arg(long = "trusted-ca-file", env = "ETCD_TRUSTED_CA_FILE")]
    trusted_ca_file: Option<PathBuf>,
    /// Require client certificates signed by --trusted-ca-file.
    #[arg(long = "client-cert-auth", env = "ETCD_CLIENT_CERT_AUTH", action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    client_cert_auth: bool,
    /// Client TLS using generated certificates: without --cert-file and
    /// --key-file, a self-signed certificate is made in
    /// `<data-dir>/fixtures/client` (kept for later starts) and served on
    /// https client URLs.
    #[arg(long = "auto-tls", env = "ETCD_AUTO_TLS", action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    auto_tls: bool,
    /// Peer TLS certificate file (PEM); serves and dials https peer URLs.
    #[arg(long = "peer-cert-file", env = "ETCD_PEER_CERT_FILE")]
    peer_cert_file: Option<PathBuf>,
    /// Peer TLS key file (PEM).
    #[arg(long = "peer-key-file", env = "ETCD_PEER_KEY_FILE")]
    peer_key_file: Option<PathBuf>,
    /// CA bundle (PEM) that other members' certificates must chain to.
    #[arg(long = "peer-trusted-ca-file", env = "ETCD_PEER_TRUSTED_CA_FILE")]
    peer_trusted_ca_file: Option<PathBuf>,
    /// Require peer client certificates signed by --peer-trusted-ca-file.
    #[arg(long = "peer-client-cert-auth", env = "ETCD_PEER_CLIENT_CERT_AUTH", action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    peer_client_cert_auth: bool,
    /// Peer TLS using self-generated certificates if --peer-key-file and
    /// --peer-cert-file are not provided (kept in `<data-dir>/fixtures/peer`).
    /// Members then accept each other's certificates without verifying
    /// them, as etcd does: the peer links are encrypted, not authenticated.
    #[arg(long = "peer-auto-tls", env = "ETCD_PEER_AUTO_TLS", action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    peer_auto_tls: bool,
    /// The validity period of the certificates --auto-tls and
    /// --peer-auto-tls generate, in years.
    #[arg(long = "self-signed-cert-validity", env = "ETCD_SELF_SIGNED_CERT_VALIDITY", default_value_t = 1)]
    self_signed_cert_validity: u32,
    /// Open connections at most on each client and peer listener; a
    /// connection over the cap is closed at once, with a warning in the log.
    /// etcd has no such cap; this keeps a flood of connections from using up
    /// the process's file descriptors.
    #[arg(long = "max-connections", env = "ETCD_MAX_CONNECTIONS", default_value_t = raftstore::serving::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Concurrent HTTP/2 streams a client may open on one connection.
    #[arg(long = "max-concurrent-streams", env = "ETCD_MAX_CONCURRENT_STREAMS", default_value_t = raftstore::serving::DEFAULT_MAX_CONCURRENT_STREAMS)]
    max_concurrent_streams: u32,
    /// How long a TLS handshake may take. For tests.
    #[arg(long = "tls-handshake-timeout", default_value = "32s", value_parser = humantime::parse_duration, hide = true)]
    tls_handshake_timeout: Duration,
    /// How long a new connection may go without a request, and an HTTP/1
    /// request head may take. For tests.
    #[arg(long = "first-request-timeout", default_value = "32s", value_parser = humantime::parse_duration, hide = true)]
    first_request_timeout: Duration,
    /// How long a connection may go without a request in flight. For tests.
    #[arg(long = "idle-timeout", default_value = "90s", value_parser = humantime::parse_duration, hide = true)]
    idle_timeout: Duration,
    /// Auth token type and options: `simple`, or
    /// `jwt,pub-key=FILE,priv-key=FILE,sign-method=RS256,ttl=5m`.
    #[arg(long = "auth-token", env = "ETCD_AUTH_TOKEN", default_value = "simple")]
    auth_token: String,
    /// Seconds a simple token lives without use.
    #[arg(long = "auth-token-ttl", env = "ETCD_AUTH_TOKEN_TTL", default_value_t = 300)]
    auth_token_ttl: u64,
    /// bcrypt cost of password hashes (4 to 31).
    #[arg(long = "bcrypt-cost", env = "ETCD_BCRYPT_COST", default_value_t = 10)]
    bcrypt_cost: u32,
    /// Specify 'zap' for structured logging or 'capnslog' (deprecated,
    /// with a warning, as in etcd 3.4). Either way the lines are
    /// raftstore's own text format.
    #[arg(long, env = "ETCD_LOGGER", default_value = "zap")]
    logger: String,
    /// Specify 'stdout' or 'stderr', or a list of comma separated output
    /// targets (file paths are appended to); 'default' is stderr. The lines
    /// naming the bound URLs, and start-up errors, always go to stderr.
    #[arg(long = "log-outputs", env = "ETCD_LOG_OUTPUTS", default_value = "default")]
    log_outputs: String,
    /// Configures log level. Only supports debug, info, warn, error, panic,
    /// or fatal; or a tracing filter (`info,raftstore::raft=debug`).
    #[arg(long = "log-level", env = "ETCD_LOG_LEVEL", default_value = "info")]
    log_level: String,
}

fn split_urls(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}

fn parse_cluster(s: &str) -> Result<Vec<(String, String)>, String> {
    split_urls(s)
        .into_iter()
        .map(|kv| match kv.split_once('=') {
            Some((n, u)) if !n.is_empty() && !u.is_empty() => Ok((n.to_string(), u.to_string())),
            _ => Err(format!("invalid --initial-cluster entry {kv:?} (want name=peerURL)")),
        })
        .collect()
}

/// TLS files for one side from etcd's flags: none without a certificate;
/// a certificate needs its key.
fn tls_files(prefix: &str, cert: Option<PathBuf>, key: Option<PathBuf>, ca: Option<PathBuf>, auth: bool) -> Result<Option<TlsFiles>, String> {
    match (cert, key) {
        (Some(cert_file), Some(key_file)) => Ok(Some(TlsFiles { cert_file, key_file, trusted_ca_file: ca, client_cert_auth: auth })),
        (None, None) if ca.is_none() && !auth => Ok(None),
        _ => Err(format!("--{prefix}cert-file and --{prefix}key-file must be given together (with --{prefix}trusted-ca-file and --{prefix}client-cert-auth optional)")),
    }
}

fn config(s: Serve) -> Result<Config, String> {
    let progress = humantime::parse_duration(&s.progress_notify_interval).map_err(|e| format!("invalid --experimental-watch-progress-notify-interval: {e}"))?;
    if progress < Duration::from_millis(100) {
        return Err("--experimental-watch-progress-notify-interval must be at least 100ms".into());
    }
    if s.heartbeat_interval == 0 || s.election_timeout < 5 * s.heartbeat_interval {
        return Err("--election-timeout should be at least 5 times --heartbeat-interval".into());
    }
    if s.max_connections == 0 {
        return Err("--max-connections must be positive".into());
    }
    if s.max_concurrent_streams == 0 {
        return Err("--max-concurrent-streams must be positive".into());
    }
    let serving = raftstore::serving::Limits {
        tls_handshake_timeout: s.tls_handshake_timeout,
        first_request_timeout: s.first_request_timeout,
        idle_timeout: s.idle_timeout,
        max_concurrent_streams: s.max_concurrent_streams,
        max_connections: s.max_connections,
    };
    // etcd's auto TLS replaces all of a side's TLS settings when no
    // certificate is given, so a CA or client-cert-auth alone is ignored.
    let (ca, auth) = if s.auto_tls && s.cert_file.is_none() && s.key_file.is_none() { (None, false) } else { (s.trusted_ca_file, s.client_cert_auth) };
    let client_tls = tls_files("", s.cert_file, s.key_file, ca, auth)?;
    let (ca, auth) = if s.peer_auto_tls && s.peer_cert_file.is_none() && s.peer_key_file.is_none() { (None, false) } else { (s.peer_trusted_ca_file, s.peer_client_cert_auth) };
    let peer_tls = tls_files("peer-", s.peer_cert_file, s.peer_key_file, ca, auth)?;
    Ok(Config {
        data_dir: s.data_dir.unwrap_or_else(|| PathBuf::from(format!("{}.raftstore", s.name))),
        name: s.name,
        listen_client_urls: split_urls(&s.listen_client_urls),
        advertise_client_urls: split_urls(&s.advertise_client_urls),
        listen_peer_urls: split_urls(&s.listen_peer_urls),
        initial_advertise_peer_urls: split_urls(&s.initial_advertise_peer_urls),
        initial_cluster: parse_cluster(&s.initial_cluster)?,
        initial_cluster_state: s.initial_cluster_state,
        initial_cluster_token: s.initial_cluster_token,
        max_request_bytes: s.max_request_bytes,
        max_txn_ops: s.max_txn_ops,
        listen_metrics_urls: split_urls(&s.listen_metrics_urls),
        wal_dir: s.wal_dir,
        client_auto_tls: s.auto_tls,
        peer_auto_tls: s.peer_auto_tls,
        self_signed_cert_validity: s.self_signed_cert_validity,
        quota_backend_bytes: s.quota_backend_bytes,
        heartbeat: Duration::from_millis(s.heartbeat_interval),
        election: Duration::from_millis(s.election_timeout),
        progress_notify_interval: progress,
        auto_compaction: AutoCompaction::parse(&s.auto_compaction_mode, &s.auto_compaction_retention)?,
        snapshot_count: s.snapshot_count.max(1),
        snapshot_catchup_entries: s.snapshot_catchup_entries,
        client_tls,
        peer_tls,
        serving,
        auth_token: s.auth_token,
        auth_token_ttl: Duration::from_secs(s.auth_token_ttl),
        bcrypt_cost: s.bcrypt_cost,
    })
}

/// `snapshot save`: reads the server at `endpoints` and writes `file`.
fn save(file: &std::path::Path, endpoints: Vec<String>, cacert: Option<PathBuf>, cert: Option<PathBuf>, key: Option<PathBuf>) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("read {}", p.display()));
    let mut opts = etcd_client::ConnectOptions::new().with_connect_timeout(Duration::from_secs(5)).with_timeout(Duration::from_secs(60));
    if cacert.is_some() || cert.is_some() {
        let mut tls = etcd_client::TlsOptions::new();
        if let Some(ca) = &cacert {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(read(ca)?));
        }
        match (&cert, &key) {
            (Some(c), Some(k)) => tls = tls.identity(etcd_client::Identity::from_pem(read(c)?, read(k)?)),
            (None, None) => {}
            _ => anyhow::bail!("--cert and --key go together"),
        }
        opts = opts.with_tls(tls);
    }
    let rt = tokio::runtime::Runtime::new().context("start runtime")?;
    let export = rt.block_on(async {
        let mut client = etcd_client::Client::connect(&endpoints, Some(opts)).await.with_context(|| format!("connect to {}", endpoints.join(",")))?;
        raftstore::import::export(&mut client).await
    })?;
    raftstore::import::write_snapshot(&export, file)?;
    Ok(format!("Snapshot saved at {}: {} keys and {} leases at revision {}", file.display(), export.kvs.len(), export.leases.len(), export.revision))
}

/// The server's flags from the configuration file at `path`, on top of the
/// defaults: the command line and the environment are not read (etcd).
///
/// # Errors
/// The file cannot be read or parsed, or holds a bad value.
fn from_file(path: &std::path::Path) -> Result<(Serve, Vec<String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("open {}: {e}", path.display()))?;
    // The server's flags without their environment variables.
    let cmd = Serve::augment_args(clap::Command::new("raftstore")).mut_args(|a| a.env(None::<&str>));
    let flags: Vec<String> = cmd.get_arguments().filter_map(|a| a.get_long().map(str::to_string)).collect();
    let args = config_file::to_args(&text, |name| flags.iter().any(|f| f == name))?;
    let in_file = |e: clap::Error| match usage::go_message(&e) {
        Some((text, _)) => format!("{}: {}", path.display(), text.lines().next().unwrap_or_default()),
        None => format!("{}: {}", path.display(), e.render().to_string().trim()),
    };
    let matches = cmd.try_get_matches_from(std::iter::once("raftstore".to_string()).chain(args.flags)).map_err(in_file)?;
    let serve = Serve::from_arg_matches(&matches).map_err(in_file)?;
    Ok((serve, args.ignored))
}

fn main() -> std::process::ExitCode {
    let cli = match Cli::command().try_get_matches_from(usage::go_style_args(std::env::args_os())).and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => return usage::report(e),
    };
    match cli.command {
        Some(Cmd::Snapshot { action: SnapshotCmd::Restore { file, data_dir, skip_hash_check, .. } }) => {
            return match raftstore::snapshot::restore_with(&file, &data_dir, raftstore::snapshot::RestoreOptions { skip_hash_check }) {
                Ok(format) => {
                    let kind = match format {
                        raftstore::snapshot::Format::Etcd => "etcd",
                        raftstore::snapshot::Format::Raftstore => "raftstore",
                    };
                    println!("restored {kind} snapshot {} into {}", file.display(), data_dir.display());
                    std::process::ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("Error: {e}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
        Some(Cmd::Snapshot { action: SnapshotCmd::Save { file, endpoints, cacert, cert, key } }) => {
            return match save(&file, endpoints, cacert, cert, key) {
                Ok(summary) => {
                    println!("{summary}");
                    std::process::ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("Error: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
        None => {}
    }
    let (serve, file) = match cli.serve.config_file.clone() {
        Some(path) => match from_file(&path) {
            Ok((serve, ignored)) => (serve, Some((path, ignored))),
            Err(e) => return usage::verify_failed(&e),
        },
        None => (cli.serve, None),
    };
    if let Err(e) = logging::init(&serve.logger, &serve.log_outputs, &serve.log_level) {
        return usage::verify_failed(&e);
    }
    if let Some((path, ignored)) = file {
        tracing::info!(path = %path.display(), "loaded server configuration, other configuration command line flags and environment variables will be ignored if provided");
        if !ignored.is_empty() {
            tracing::warn!(path = %path.display(), "configuration file keys raftstore has no flag for are ignored: {}", ignored.join(", "));
        }
    }
    let cfg = match config(serve) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("Error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let peer_scheme = if cfg.listen_peer_urls.first().is_some_and(|u| u.starts_with("https:")) { "https" } else { "http" };
    rt.block_on(async move {
        match node::start(cfg).await {
            Ok(mut h) => {
                eprintln!("raftstore: serving peer traffic on {peer_scheme}://{}", h.peer_addr);
                for url in &h.client_urls {
                    eprintln!("raftstore: serving client requests on {url}");
                }
                for url in &h.metrics_urls {
                    eprintln!("raftstore: serving metrics on {url}");
                }
                tracing::info!("ready to serve client requests");
                let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("Error: {e}");
                        return std::process::ExitCode::FAILURE;
                    }
                };
                let removed = async {
                    while !*h.removed.borrow_and_update() {
                        if h.removed.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                };
                let signalled = tokio::select! {
                    _ = tokio::signal::ctrl_c() => true,
                    _ = term.recv() => true,
                    _ = removed => {
                        eprintln!("raftstore: {}; stopping", raftstore::raft::network::REMOVED_MESSAGE);
                        if let Err(e) = node::mark_removed(&h.ctx.data_dir) {
                            eprintln!("raftstore: {e}");
                        }
                        false
                    },
                };
                if signalled {
                    // etcd's leader hands its leadership over before it
                    // stops, so the others need not wait out an election.
                    h.stop().await;
                } else {
                    let _ = h.node.raft.shutdown().await;
                }
                // Go removes a unix socket's file when its listener closes.
                for file in &h.unix_sockets {
                    let _ = std::fs::remove_file(file);
                }
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("Error: {e}");
                std::process::ExitCode::FAILURE
            }
        }
    })
}
