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
    /// Remote etcd endpoints (comma-separated `http://` or `https://`
    /// URLs, kube-apiserver's `--etcd-servers`). Empty: use the embedded
    /// store.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// CA bundle (PEM) that verifies the certificates of `https://`
    /// `--etcd-servers` and overrides (kube's `--etcd-cafile`).
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate (PEM) presented to etcd (kube's
    /// `--etcd-certfile`); needs `--etcd-keyfile`.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// Key (PEM) of `--etcd-certfile` (kube's `--etcd-keyfile`).
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// The root of every key the API server writes and reads (kube's
    /// `--etcd-prefix`): objects live at
    /// `<prefix>/[<group>/]<resource>/[<namespace>/]<name>`. Applies to the
    /// embedded store and to remote etcd alike.
    #[arg(long, default_value = crate::storage::prefixed::DEFAULT_PREFIX)]
    pub etcd_prefix: String,
    /// Per-resource etcd servers (kube's `--etcd-servers-overrides`):
    /// comma-separated `group/resource#servers` entries, the servers of one
    /// entry separated by semicolons, the core group empty
    /// (`/events#https://etcd-ev:2379;https://etcd-ev2:2379`). Those
    /// resources are stored there, under the same `--etcd-prefix` and with
    /// the same TLS flags.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers_overrides: Vec<String>,
    /// Serving certificate (PEM). Default: generated in the data dir.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA bundle that verifies client certificates. Default: the generated CA.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Static bearer tokens (kube's `--token-auth-file`): CSV lines
    /// `token,user,uid[,"group1,group2"]`, read at start.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// `--oidc-*` and `--authentication-config` (JWT issuers).
    #[command(flatten)]
    pub oidc: crate::authn::oidc::Flags,
    /// `--authentication-token-webhook-*`.
    #[command(flatten)]
    pub token_webhook: crate::authn::webhook::Flags,
    /// `--authorization-webhook-*`.
    #[command(flatten)]
    pub authorization_webhook: crate::authz::webhook::Flags,
    /// PEM files of keys that verify ServiceAccount tokens (kube's
    /// `--service-account-key-file`, repeatable): public or private RSA or
    /// ECDSA keys, or certificates. Default: the signing key's.
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,
    /// PEM private key that signs ServiceAccount tokens (kube's
    /// `--service-account-signing-key-file`). With neither key flag, a key
    /// is generated as `<pki dir>/sa.key` on first start.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Issuers of ServiceAccount tokens (kube's `--service-account-issuer`,
    /// repeatable): the first one signs, all are accepted. Default:
    /// `https://kubernetes.default.svc.cluster.local`.
    #[arg(long)]
    pub service_account_issuer: Vec<String>,
    /// Audiences of the API (kube's `--api-audiences`, comma-separated):
    /// tokens must be for one of them. Default: the issuers.
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// Longest ServiceAccount token a TokenRequest gets (kube's
    /// `--service-account-max-token-expiration`); longer requests are cut
    /// to it. Default: no limit.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub service_account_max_token_expiration: Option<std::time::Duration>,
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
    /// Certificate (PEM) of the embedded store's peer URL, presented to the
    /// other members both as server and as client (etcd's
    /// `--peer-cert-file`). With it, `https://` peer URLs are served and
    /// dialled over TLS; needs `--peer-key-file` and
    /// `--peer-trusted-ca-file`.
    #[arg(long)]
    pub peer_cert_file: Option<PathBuf>,
    /// Key (PEM) of `--peer-cert-file` (etcd's `--peer-key-file`).
    #[arg(long)]
    pub peer_key_file: Option<PathBuf>,
    /// CA bundle (PEM) the other members' peer certificates must chain to
    /// (etcd's `--peer-trusted-ca-file`).
    #[arg(long)]
    pub peer_trusted_ca_file: Option<PathBuf>,
    /// Refuse peer connections without a certificate signed by
    /// `--peer-trusted-ca-file` (etcd's `--peer-client-cert-auth`).
    #[arg(long)]
    pub peer_client_cert_auth: bool,
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
    /// How much history the store keeps before compacting it
    /// (kube-apiserver's `--etcd-compaction-interval`, default 5m; `0`
    /// disables). The embedded store's leader compacts to the revision it had
    /// this long ago. Remote `--etcd-servers` (and each override's servers)
    /// are compacted as kube-apiserver compacts them: every interval, to the
    /// revision seen one interval before, coordinated with the other API
    /// servers of that etcd through etcd's `compact_rev_key`. Either way a
    /// resourceVersion or continue token older than that gets 410 Expired,
    /// and the store does not grow without bound.
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
    /// The plugins' configuration (kube's `--admission-control-config-file`):
    /// an `apiserver.config.k8s.io/v1` `AdmissionConfiguration`, YAML or
    /// JSON; read: `PodSecurity`'s `PodSecurityConfiguration`.
    #[arg(long)]
    pub admission_control_config_file: Option<std::path::PathBuf>,
    /// Ordered authorizers (kube's `--authorization-mode`, comma-separated):
    /// `AlwaysAllow`, `AlwaysDeny`, `RBAC`, `Node` or `Webhook`; kube's
    /// other modes are refused until they exist.
    #[arg(long, value_delimiter = ',', default_value = "AlwaysAllow")]
    pub authorization_mode: Vec<String>,
    /// Requests without credentials are the user `system:anonymous` in the
    /// group `system:unauthenticated`, and get what the authorizer grants
    /// them (kube's `--anonymous-auth`, default true). With `AlwaysAllow`
    /// among the modes, kube turns anonymous access off altogether; this
    /// server then lets anonymous requests reach only `/healthz`, `/livez`,
    /// `/readyz` and `/version`, so health checks work without a client
    /// certificate. `false`: every request without credentials is 401.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
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
    /// How long the server keeps serving after SIGTERM (or SIGINT) with
    /// `/readyz` failing, so load balancers take it out of rotation before
    /// it stops accepting connections (kube's `--shutdown-delay-duration`,
    /// default 0). After it, the server stops accepting, lets requests in
    /// flight finish (up to 60 s), ends watches with a last BOOKMARK, moves
    /// the embedded store's leadership to another member and exits.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub shutdown_delay_duration: std::time::Duration,
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
    /// Auditing (kube's `--audit-*` flags).
    #[command(flatten)]
    pub audit: crate::audit::options::AuditOptions,
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

/// One `--etcd-servers-overrides` entry: a resource on its own servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOverride {
    /// API group; empty for the core group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Its etcd servers.
    pub servers: Vec<String>,
}

impl Options {
    /// `--etcd-servers-overrides`, parsed as kube-apiserver parses it.
    ///
    /// # Errors
    /// An entry that is not `group/resource#server;server...`, or whose
    /// servers are not all `http://` or all `https://` URLs.
    pub fn etcd_servers_overrides(&self) -> anyhow::Result<Vec<EtcdOverride>> {
        let mut out: Vec<EtcdOverride> = Vec::new();
        for entry in self.etcd_servers_overrides.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            // kube's wording (`options/etcd.go`), and the entry.
            let invalid = || anyhow::anyhow!("--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated: {entry:?}");
            let (resource, servers) = entry.split_once('#').ok_or_else(invalid)?;
            let (group, resource) = resource.split_once('/').ok_or_else(invalid)?;
            if servers.contains('#') || resource.contains('/') || resource.is_empty() {
                return Err(invalid());
            }
            let servers: Vec<String> = servers.split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            if servers.is_empty() {
                return Err(invalid());
            }
            check_etcd_urls(&format!("--etcd-servers-overrides {group}/{resource}"), &servers)?;
            if out.iter().any(|o| o.group == group && o.resource == resource) {
                anyhow::bail!("--etcd-servers-overrides: {group}/{resource} is given twice");
            }
            out.push(EtcdOverride { group: group.to_string(), resource: resource.to_string(), servers });
        }
        Ok(out)
    }

    /// The embedded store's peer TLS (`--peer-*` flags), checked together.
    ///
    /// # Errors
    /// A certificate without its key or CA, or the reverse.
    pub fn peer_tls(&self) -> anyhow::Result<Option<raftstore::node::TlsFiles>> {
        match (&self.peer_cert_file, &self.peer_key_file, &self.peer_trusted_ca_file) {
            (None, None, None) if !self.peer_client_cert_auth => Ok(None),
            (Some(cert), Some(key), Some(ca)) => {
                Ok(Some(raftstore::node::TlsFiles { cert_file: cert.clone(), key_file: key.clone(), trusted_ca_file: Some(ca.clone()), client_cert_auth: self.peer_client_cert_auth }))
            }
            _ => anyhow::bail!("--peer-cert-file, --peer-key-file and --peer-trusted-ca-file go together (with --peer-client-cert-auth optional)"),
        }
    }

    /// The client TLS to etcd of `--etcd-cafile`, `--etcd-certfile` and
    /// `--etcd-keyfile`, read and checked now so that a bad file fails the
    /// start; `None` without them.
    ///
    /// # Errors
    /// A file that cannot be read or holds no PEM certificate or key; a
    /// certificate without its key or the other way round; https servers
    /// without `--etcd-cafile` (no system roots are built in); TLS files
    /// with only `http://` servers; servers that are not URLs.
    pub fn etcd_tls(&self) -> anyhow::Result<Option<crate::storage::remote::Tls>> {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        check_etcd_urls("--etcd-servers", &self.etcd_servers)?;
        let overrides = self.etcd_servers_overrides()?;
        let https = self.etcd_servers.iter().chain(overrides.iter().flat_map(|o| &o.servers)).any(|u| u.starts_with("https://"));
        let read = |flag: &str, path: &std::path::Path| std::fs::read(path).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()));
        let certs = |flag: &str, path: &std::path::Path| -> anyhow::Result<Vec<u8>> {
            let pem = read(flag, path)?;
            let n = CertificateDer::pem_slice_iter(&pem).filter(Result::is_ok).count();
            anyhow::ensure!(n > 0, "{flag} {}: no PEM certificate in it", path.display());
            Ok(pem)
        };
        let identity = match (&self.etcd_certfile, &self.etcd_keyfile) {
            (None, None) => None,
            (Some(c), Some(k)) => {
                let cert = certs("--etcd-certfile", c)?;
                let key = read("--etcd-keyfile", k)?;
                PrivateKeyDer::from_pem_slice(&key).map_err(|e| anyhow::anyhow!("--etcd-keyfile {}: no PEM private key in it: {e}", k.display()))?;
                Some((cert, key))
            }
            (Some(_), None) => anyhow::bail!("--etcd-certfile needs --etcd-keyfile"),
            (None, Some(_)) => anyhow::bail!("--etcd-keyfile needs --etcd-certfile"),
        };
        let Some(ca) = &self.etcd_cafile else {
            anyhow::ensure!(!https, "https:// etcd servers need --etcd-cafile, the CA that signed their certificates");
            anyhow::ensure!(identity.is_none(), "--etcd-certfile and --etcd-keyfile need https:// etcd servers and --etcd-cafile");
            return Ok(None);
        };
        let ca = certs("--etcd-cafile", ca)?;
        anyhow::ensure!(https, "--etcd-cafile, --etcd-certfile and --etcd-keyfile apply to https:// etcd servers; --etcd-servers and --etcd-servers-overrides have none");
        Ok(Some(crate::storage::remote::Tls { ca, identity }))
    }
}

/// Checks one set of etcd servers: URLs of one scheme, `http` or `https`.
fn check_etcd_urls(flag: &str, servers: &[String]) -> anyhow::Result<()> {
    for s in servers {
        anyhow::ensure!(s.starts_with("http://") || s.starts_with("https://"), "{flag}: {s:?} is not an http:// or https:// URL");
    }
    let https = servers.iter().filter(|s| s.starts_with("https://")).count();
    anyhow::ensure!(https == 0 || https == servers.len(), "{flag}: mixes http:// and https:// servers ({})", servers.join(", "));
    Ok(())
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

    /// kube's `--etcd-servers-overrides` format, core group empty.
    #[test]
    fn etcd_servers_overrides_parse_like_kube() {
        let o = Options::parse_from(["apiserver", "--etcd-servers-overrides", "/events#https://a:2379;https://b:2379,apps/deployments#http://c:2379"]);
        let got = o.etcd_servers_overrides().unwrap_or_default();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].group.as_str(), got[0].resource.as_str()), ("", "events"));
        assert_eq!(got[0].servers, ["https://a:2379", "https://b:2379"]);
        assert_eq!((got[1].group.as_str(), got[1].resource.as_str(), got[1].servers.as_slice()), ("apps", "deployments", ["http://c:2379".to_string()].as_slice()));
        for bad in [
            "events#http://a:2379",
            "/events",
            "/events#",
            "a/b/c#http://a:2379",
            "/events#http://a#b",
            "/#http://a:2379",
            "/events#a:2379",
            "/events#http://a:1;https://b:2",
            "/events#http://a:1,/events#http://b:1",
        ] {
            let err = Options::parse_from(["apiserver", "--etcd-servers-overrides", bad]).etcd_servers_overrides().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.starts_with("--etcd-servers-overrides"), "{bad}: {err}");
        }
    }

    /// The peer TLS flags come as a set; a partial set fails the start.
    #[test]
    fn peer_tls_flags_go_together() {
        let peer = |args: &[&str]| {
            let mut all = vec!["apiserver"];
            all.extend_from_slice(args);
            Options::parse_from(all).peer_tls()
        };
        assert!(matches!(peer(&[]), Ok(None)));
        let full = peer(&["--peer-cert-file", "p.crt", "--peer-key-file", "p.key", "--peer-trusted-ca-file", "ca.crt", "--peer-client-cert-auth"]);
        let files = full.ok().flatten().map(|t| (t.cert_file, t.key_file, t.trusted_ca_file, t.client_cert_auth));
        assert_eq!(files, Some(("p.crt".into(), "p.key".into(), Some("ca.crt".into()), true)));
        for partial in [&["--peer-cert-file", "p.crt"][..], &["--peer-cert-file", "p.crt", "--peer-key-file", "p.key"], &["--peer-client-cert-auth"], &["--peer-trusted-ca-file", "ca.crt"]] {
            let err = peer(partial).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("go together"), "{partial:?}: {err}");
        }
    }

    /// Bad TLS flags fail the start with the flag's name.
    #[test]
    fn etcd_tls_flags_are_checked() {
        let tls = |args: &[&str]| {
            let mut all = vec!["apiserver"];
            all.extend_from_slice(args);
            Options::parse_from(all).etcd_tls().err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert!(tls(&["--etcd-servers", "https://a:2379"]).contains("--etcd-cafile"));
        assert!(tls(&["--etcd-servers", "https://a:2379", "--etcd-cafile", "/nonexistent/ca.crt"]).starts_with("--etcd-cafile /nonexistent/ca.crt"));
        assert!(tls(&["--etcd-servers", "https://a:2379", "--etcd-certfile", "/x.crt"]).contains("needs --etcd-keyfile"));
        assert!(tls(&["--etcd-servers", "https://a:2379", "--etcd-keyfile", "/x.key"]).contains("needs --etcd-certfile"));
        assert!(tls(&["--etcd-servers", "http://a:2379,https://b:2379"]).contains("mixes"));
        assert!(tls(&["--etcd-servers", "a:2379"]).contains("not an http"));
        assert!(Options::parse_from(["apiserver", "--etcd-servers", "http://a:2379"]).etcd_tls().is_ok_and(|t| t.is_none()));
    }
}
