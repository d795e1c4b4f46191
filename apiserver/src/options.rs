//! Command-line flags. kube-apiserver's names where they apply.

use std::path::PathBuf;

use clap::Parser;

/// `apiserver` flags.
#[derive(Debug, Clone, Parser)]
#[command(name = "apiserver", about = "A Kubernetes API server with an embedded etcd-compatible store.")]
pub struct Options {
    /// HTTPS port; 0 picks a free port (printed at start).
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: String,
    /// Where certificates, the admin kubeconfig and the embedded store live.
    #[arg(long, default_value = "./apiserver-data")]
    pub data_dir: PathBuf,
    /// Remote etcd endpoints (comma-separated). Empty: use the embedded store.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// Serving certificate (PEM). Default: generated in the data dir.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA bundle that verifies client certificates. Default: the generated CA.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Name of the embedded store member.
    #[arg(long, default_value = "default")]
    pub name: String,
    /// Client URL of the embedded store (etcd API; port 0 picks one).
    #[arg(long, alias = "listen-client-urls", default_value = "http://127.0.0.1:0")]
    pub etcd_listen_client_url: String,
    /// Peer URL of the embedded store (port 0 picks one; in a cluster, the
    /// URL named for this member in `--initial-cluster`).
    #[arg(long, alias = "listen-peer-urls", default_value = "http://127.0.0.1:0")]
    pub etcd_listen_peer_url: String,
    /// The embedded store's cluster, as etcd's `--initial-cluster`:
    /// `name=peerURL,...`, this member (`--name`) among them. Empty: a
    /// single-member cluster. Every member serves the API from its own
    /// replica; writes go through Raft from any of them.
    #[arg(long, default_value = "")]
    pub initial_cluster: String,
    /// `new` (bootstrap with `--initial-cluster`) or `existing` (join a
    /// running cluster), as etcd.
    #[arg(long, default_value = "new", value_parser = ["new", "existing"])]
    pub initial_cluster_state: String,
    /// etcd's `--initial-cluster-token` (member IDs derive from it).
    #[arg(long, default_value = "etcd-cluster")]
    pub initial_cluster_token: String,
    /// Peer URL announced to the other members (empty: the bound one).
    #[arg(long, default_value = "")]
    pub initial_advertise_peer_urls: String,
    /// Directory of the CA, serving and admin certificates (default:
    /// `<data-dir>/pki`). Nodes of one cluster share one: create it on the
    /// first node (or with any node's first start) and give every node the
    /// same directory (or a copy), so one kubeconfig works on all of them.
    #[arg(long)]
    pub pki_dir: Option<PathBuf>,
    /// Serve list, get and watch from the watch cache (kube's
    /// `--watch-cache`); `false` reads the store directly.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_cache: bool,
    /// Events each resource's watch cache keeps (kube's
    /// `--default-watch-cache-size`); clamped to 100..=102400. The default
    /// holds ~75 s of a busy resource's events.
    #[arg(long, default_value_t = crate::watchcache::DEFAULT_CAPACITY)]
    pub default_watch_cache_size: usize,
    /// How much history the embedded store keeps before compacting it
    /// (kube-apiserver's `--etcd-compaction-interval`, default 5m; `0`
    /// disables). The embedded store's leader compacts to the revision it had
    /// this long ago, so a resourceVersion or continue token older than that
    /// gets 410 Expired, and the store does not grow without bound. Remote
    /// `--etcd-servers` are left to their own compaction.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub etcd_compaction_interval: std::time::Duration,
    /// Admission plugins to enable besides the default ones (kube's
    /// `--enable-admission-plugins`, comma-separated kube plugin names; they
    /// run in kube's order whatever the order here).
    #[arg(long, value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,
    /// Default admission plugins to disable (kube's
    /// `--disable-admission-plugins`).
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,
    /// Ordered authorizers (kube's `--authorization-mode`, comma-separated):
    /// `AlwaysAllow` or `AlwaysDeny`; kube's other modes are refused until
    /// they exist.
    #[arg(long, value_delimiter = ',', default_value = "AlwaysAllow")]
    pub authorization_mode: Vec<String>,
    /// Concurrent HTTP/2 streams a client may open on one connection
    /// (kube's `--http2-max-streams-per-connection`); 0 means Go's default
    /// of 250, as in kube.
    #[arg(long, default_value_t = 0)]
    pub http2_max_streams_per_connection: u32,
    /// Open client connections at most; connections over the cap are
    /// closed at once, with a warning in the log. kube-apiserver has no
    /// such cap; this keeps a flood of idle connections from using up the
    /// process's file descriptors.
    #[arg(long, default_value_t = 8192)]
    pub max_connections: usize,
    /// How long a TLS handshake may take (kube: its 32 s read-header
    /// timeout, which Go applies to handshakes). For tests.
    #[arg(long, default_value = "32s", value_parser = humantime::parse_duration, hide = true)]
    pub tls_handshake_timeout: std::time::Duration,
    /// How long an HTTP/1 request head may take to arrive (kube's
    /// `ReadHeaderTimeout`, 32 s). For tests.
    #[arg(long, default_value = "32s", value_parser = humantime::parse_duration, hide = true)]
    pub read_header_timeout: std::time::Duration,
    /// How long a connection may stay without a request in flight (kube's
    /// `IdleTimeout`, 90 s). For tests.
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration, hide = true)]
    pub idle_timeout: std::time::Duration,
}

impl Options {
    /// The serving port's connection limits.
    pub fn serving_limits(&self) -> crate::serving::Limits {
        crate::serving::Limits {
            tls_handshake_timeout: self.tls_handshake_timeout,
            read_header_timeout: self.read_header_timeout,
            idle_timeout: self.idle_timeout,
            http2_max_streams: if self.http2_max_streams_per_connection == 0 { crate::serving::DEFAULT_HTTP2_STREAMS } else { self.http2_max_streams_per_connection },
            max_connections: self.max_connections,
        }
    }

    /// `--initial-cluster` as (name, peer URL) pairs.
    ///
    /// # Errors
    /// An entry that is not `name=URL`.
    pub fn initial_cluster(&self) -> anyhow::Result<Vec<(String, String)>> {
        split_urls(&self.initial_cluster)
            .into_iter()
            .map(|kv| match kv.split_once('=') {
                Some((n, u)) if !n.is_empty() && !u.is_empty() => Ok((n.to_string(), u.to_string())),
                _ => Err(anyhow::anyhow!("invalid --initial-cluster entry {kv:?} (want name=peerURL)")),
            })
            .collect()
    }
}

/// Splits a comma-separated URL list.
pub fn split_urls(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::Options;

    /// The serving limits default to kube-apiserver's.
    #[test]
    fn serving_limits_default_to_kube() {
        let l = Options::parse_from(["apiserver"]).serving_limits();
        assert_eq!(l.read_header_timeout, std::time::Duration::from_secs(32));
        assert_eq!(l.tls_handshake_timeout, std::time::Duration::from_secs(32));
        assert_eq!(l.idle_timeout, std::time::Duration::from_secs(90));
        assert_eq!(l.http2_max_streams, 250);
        let l = Options::parse_from(["apiserver", "--http2-max-streams-per-connection", "7"]).serving_limits();
        assert_eq!(l.http2_max_streams, 7);
    }
}
