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
    #[arg(long, default_value = "http://127.0.0.1:0")]
    pub etcd_listen_client_url: String,
    /// Peer URL of the embedded store (port 0 picks one).
    #[arg(long, default_value = "http://127.0.0.1:0")]
    pub etcd_listen_peer_url: String,
    /// Serve list, get and watch from the watch cache (kube's
    /// `--watch-cache`); `false` reads the store directly.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_cache: bool,
    /// Events each resource's watch cache keeps (kube's
    /// `--default-watch-cache-size`); clamped to 100..=102400. The default
    /// holds ~75 s of a busy resource's events.
    #[arg(long, default_value_t = crate::watchcache::DEFAULT_CAPACITY)]
    pub default_watch_cache_size: usize,
}
