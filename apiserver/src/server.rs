//! Starting the server: storage, certificates, the TLS listener and
//! HTTP/1.1 + HTTP/2 serving of the handler chain.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use serde_json::json;
use tokio::net::TcpListener;

use crate::authn::x509::{PeerCertificates, UnverifiedCertificate};
use crate::endpoints::{build_handler_chain, ApiState, Handler};
use crate::options::Options;
use crate::registry::Registry;
use crate::storage::{embedded::EmbeddedKv, kv::Kv, prefixed::PrefixedKv, remote::RemoteKv, routed::RoutedStorage, Direct, KvStorage, Storage, StorageProvider};

/// Namespaces that always exist (kube's bootstrap controller).
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

fn load_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path).with_context(|| format!("read {}", path.display()))?.collect();
    let certs = certs.with_context(|| format!("parse {}", path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificates in {}", path.display());
    Ok(certs)
}

/// Asks for a client certificate and checks only the handshake signature,
/// so that a certificate from another CA still completes the handshake:
/// the chain is verified afterwards ([`verify_peer`]) and a bad one gets
/// 401 Unauthorized, as kube-apiserver (`tls.RequestClientCert` and its x509
/// authenticator) answers, instead of a TLS alert.
#[derive(Debug)]
struct DeferredClientVerifier(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for DeferredClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(&self, _end_entity: &CertificateDer<'_>, _intermediates: &[CertificateDer<'_>], _now: UnixTime) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Verifies a connection's client chain (leaf first) against the client CA:
/// the verified chain, or why it is not trusted.
fn verify_peer(verifier: &dyn ClientCertVerifier, chain: Vec<CertificateDer<'static>>) -> Result<PeerCertificates, UnverifiedCertificate> {
    if let Some((leaf, intermediates)) = chain.split_first() {
        if let Err(e) = verifier.verify_client_cert(leaf, intermediates, UnixTime::now()) {
            return Err(UnverifiedCertificate(e.to_string().into()));
        }
    }
    Ok(PeerCertificates(Arc::new(chain)))
}

/// The TLS config and the client-CA verifier its connections are checked
/// with after the handshake.
fn tls_config(cert: &Path, key: &Path, client_ca: &Path) -> anyhow::Result<(rustls::ServerConfig, Arc<dyn ClientCertVerifier>)> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in load_certs(client_ca)? {
        roots.add(c).context("add client CA")?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).allow_unauthenticated().build().context("client verifier")?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("read {}", key.display()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_client_cert_verifier(Arc::new(DeferredClientVerifier(verifier.clone())))
        .with_single_cert(load_certs(cert)?, key)
        .context("serving certificate")?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((cfg, verifier))
}

/// The store of the flags, opened: the storage, and the embedded member
/// whose leader the start-up waits for (none on remote etcd).
struct Opened {
    storage: Arc<dyn Storage>,
    member: Option<raftstore::node::NodeHandle>,
}

/// The store of the flags: the embedded member or `--etcd-servers`, keys
/// under `--etcd-prefix`, and the resources of `--etcd-servers-overrides`
/// on their own servers. Remote servers are compacted every
/// `--etcd-compaction-interval`, as kube-apiserver compacts them. The
/// embedded member is started but may have no leader yet.
async fn open_storage(opts: &Options) -> anyhow::Result<Opened> {
    // Every etcd flag is checked before anything starts or connects.
    let tls = opts.etcd_tls()?;
    let overrides = opts.etcd_servers_overrides()?;
    let peer_tls = opts.peer_tls()?;
    let mut member = None;
    let kv: Arc<dyn Kv> = if opts.etcd_servers.is_empty() {
        let cfg = raftstore::node::Config {
            name: opts.name.clone(),
            data_dir: opts.data_dir.join("store"),
            listen_client_urls: vec![opts.etcd_listen_client_url.clone()],
            listen_peer_urls: vec![opts.etcd_listen_peer_url.clone()],
            initial_cluster: opts.initial_cluster()?,
            initial_cluster_state: opts.initial_cluster_state.clone(),
            initial_cluster_token: opts.initial_cluster_token.clone(),
            initial_advertise_peer_urls: crate::options::split_urls(&opts.initial_advertise_peer_urls),
            auto_compaction: (!opts.etcd_compaction_interval.is_zero()).then_some(raftstore::compactor::AutoCompaction::Periodic(opts.etcd_compaction_interval)),
            peer_tls,
            ..Default::default()
        };
        let handle = raftstore::node::start(cfg).await.context("start the embedded store")?;
        println!("embedded etcd API on http://{}", handle.client_addr);
        let kv = with_prefix(EmbeddedKv::new(handle.ctx.clone()), &opts.etcd_prefix);
        member = Some(handle);
        kv
    } else {
        connect_remote(opts, "--etcd-servers", &opts.etcd_servers, tls.as_ref()).await?
    };
    let default: Arc<dyn Storage> = Arc::new(KvStorage::new(kv));
    if overrides.is_empty() {
        return Ok(Opened { storage: default, member });
    }
    let mut routes = Vec::with_capacity(overrides.len());
    for o in &overrides {
        let kv = connect_remote(opts, &format!("--etcd-servers-overrides {}/{}", o.group, o.resource), &o.servers, tls.as_ref()).await?;
        routes.push((crate::storage::keys::prefix(&o.group, &o.resource, None), Arc::new(KvStorage::new(kv)) as Arc<dyn Storage>));
    }
    Ok(Opened { storage: Arc::new(RoutedStorage::new(default, routes)), member })
}

/// How long the start-up waits between attempts on a store that is not up.
const STARTUP_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the controllers started by [`start_up`] feed: the RBAC
/// authorizer (when RBAC is a mode), the Node authorizer's graph (when
/// Node is) and the ServiceAccount controllers' tokens and CA.
struct Feeds {
    admission: Arc<crate::admission::sources::Sources>,
    rbac: Option<crate::controllers::RbacFeed>,
    node: Option<Arc<crate::authz::node::Graph>>,
    service_accounts: crate::controllers::service_account::Feed,
}

/// What runs once the store is up (kube's post-start hooks): waits for the
/// embedded member's leader, however long its peers take, then creates the
/// system namespaces (retried until the store takes them), opens the API
/// ([`crate::health::Health::mark_started`]) and starts the controllers,
/// with the loops that feed the authorizers and the ServiceAccount
/// controllers ([`Feeds`]).
///
/// # Errors
/// The embedded member stopped.
async fn start_up(
    member: Option<raftstore::node::NodeHandle>,
    storage: Arc<dyn Storage>,
    registry: Arc<Registry>,
    health: Arc<crate::health::Health>,
    identity: String,
    feeds: Feeds,
) -> anyhow::Result<crate::controllers::Controllers> {
    let Feeds { admission, rbac, node, service_accounts } = feeds;
    if let Some(m) = &member {
        let mut waited = std::time::Duration::ZERO;
        loop {
            let began = std::time::Instant::now();
            match m.node.wait_for_leader().await {
                Ok(_) => break,
                Err(raftstore::error::Error::Stopped) => anyhow::bail!("the embedded store stopped before it had a leader"),
                Err(e) => {
                    waited += began.elapsed();
                    tracing::warn!("embedded store has no leader after {}s ({e}); waiting for a quorum of its members", waited.as_secs());
                }
            }
        }
    }
    loop {
        match bootstrap_namespaces(storage.as_ref()).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!("{e}; retrying");
                tokio::time::sleep(STARTUP_RETRY).await;
            }
        }
    }
    health.mark_started();
    tracing::info!("the store is up: serving the API");
    Ok(crate::controllers::start(registry, &identity, Some(admission), rbac, node, Some(service_accounts)))
}

/// A client of one set of etcd servers, with its compactor.
async fn connect_remote(opts: &Options, flag: &str, servers: &[String], tls: Option<&crate::storage::remote::Tls>) -> anyhow::Result<Arc<dyn Kv>> {
    // TLS goes to https sets only (a set is all http or all https).
    let tls = tls.filter(|_| servers.iter().all(|s| s.starts_with("https://")));
    let remote = RemoteKv::connect(servers, tls).await.with_context(|| format!("connect to {flag} {}", servers.join(",")))?;
    if !opts.etcd_compaction_interval.is_zero() {
        crate::storage::compactor::start(remote.client(), opts.etcd_compaction_interval, servers.join(","));
    }
    Ok(with_prefix(remote, &opts.etcd_prefix))
}

/// `kv` with its keys under `--etcd-prefix`; the default prefix needs no
/// mapping.
fn with_prefix<K: Kv>(kv: K, prefix: &str) -> Arc<dyn Kv> {
    if crate::storage::prefixed::normalize(prefix) == crate::storage::prefixed::DEFAULT_PREFIX {
        Arc::new(kv)
    } else {
        Arc::new(PrefixedKv::new(kv, prefix))
    }
}

/// How the API is wired (the flags that shape it).
pub struct ApiConfig {
    /// The schema of every kind (compiled with
    /// [`crate::schema::SchemaStore::builtin`], off the async threads).
    pub schemas: crate::schema::SchemaStore,
    /// Serve list, get and watch from the watch cache.
    pub watch_cache: bool,
    /// Events each resource's watch cache keeps.
    pub watch_cache_size: usize,
    /// `--enable-admission-plugins`.
    pub enable_admission_plugins: Vec<String>,
    /// `--disable-admission-plugins`.
    pub disable_admission_plugins: Vec<String>,
    /// `--admission-control-config-file`, read.
    pub admission_config: crate::admission::config::AdmissionConfig,
    /// Who sent a request.
    pub authenticator: Arc<dyn crate::authn::Authenticator>,
    /// Whether they may.
    pub authorizer: Arc<dyn crate::authz::Authorizer>,
    /// The RBAC authorizer when RBAC is a mode: its rules guard RBAC
    /// writes against escalation.
    pub rbac: Option<Arc<crate::authz::rbac::Rbac>>,
    /// `host:port` shown in `/api` discovery.
    pub advertise_address: String,
    /// Auditing, when `--audit-policy-file` and a backend are set.
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// ServiceAccount tokens: the `serviceaccounts/token` subresource, the
    /// OpenID discovery documents and TokenReview's default audiences.
    pub service_accounts: Option<Arc<crate::authn::service_account::Tokens>>,
}

/// The API over one store, wired: the registry of the built-in resources,
/// the state the handlers share and the handler chain.
pub struct Api {
    /// Served resources (add and remove resources here at run time).
    pub registry: Arc<Registry>,
    /// The handlers' state.
    pub state: Arc<ApiState>,
    /// The filter chain and handlers, ready for requests.
    pub chain: Arc<dyn Handler>,
    /// The watch cache, when on.
    pub cache: Option<Arc<crate::watchcache::CachedStorage>>,
    /// The local copies the admission plugins read, for the controllers'
    /// admission feed to fill ([`crate::controllers::start`]).
    pub admission_sources: Arc<crate::admission::sources::Sources>,
}

/// Wires the API over `storage`: the admission chain of the flags, the
/// registry with the built-in resources (each with its watch cache when the
/// cache is on, started now), discovery, OpenAPI and the handler chain.
/// Call it inside a Tokio runtime.
///
/// Resource requests get 429 until the caller has the store ready and
/// calls [`crate::health::Health::mark_started`] on `state.health`; the
/// watch caches start now and retry until the store answers.
///
/// # Errors
/// Unknown admission plugin names; a bad plugin entry of the admission
/// configuration file.
pub fn build_api(storage: Arc<dyn Storage>, cfg: ApiConfig) -> anyhow::Result<Api> {
    let admission_sources = crate::admission::sources::Sources::new();
    let config = Arc::new(cfg.admission_config.clone());
    let plugins = crate::admission::plugins::Context { storage: storage.clone(), sources: admission_sources.clone(), authorizer: cfg.authorizer.clone(), schemas: cfg.schemas.clone(), config };
    let (admission, missing) = crate::admission::plugins::build(&cfg.enable_admission_plugins, &cfg.disable_admission_plugins, &plugins)?;
    if !missing.is_empty() {
        tracing::debug!("admission plugins not implemented yet, skipped: {}", missing.join(", "));
    }
    let cache = cfg.watch_cache.then(|| Arc::new(crate::watchcache::CachedStorage::new(storage.clone(), Vec::new(), cfg.watch_cache_size)));
    let provider: Arc<dyn StorageProvider> = match &cache {
        Some(c) => Arc::new(crate::watchcache::CacheProvider(c.clone())),
        None => Arc::new(Direct(storage.clone())),
    };
    let registry = Arc::new(Registry::new(provider, Arc::new(admission), cfg.schemas.clone()));
    let mut defs = crate::registry::builtin(cfg.authorizer.clone(), cfg.rbac.clone());
    let api_audiences = cfg.service_accounts.as_ref().map(|t| t.config().api_audiences.clone()).unwrap_or_default();
    defs.push(crate::registry::auth::token_reviews(cfg.authenticator.clone(), api_audiences));
    if let Some(tokens) = cfg.service_accounts.as_ref().filter(|t| t.can_issue()) {
        for d in defs.iter_mut().filter(|d| d.gvr() == ("", "v1", "serviceaccounts")) {
            if let crate::registry::Serving::Stored(subs) = &mut d.serving {
                subs.push(crate::registry::token_request::subresource(tokens.clone()));
            }
        }
    }
    registry.add_all(defs)?;
    let health = Arc::new(crate::health::Health::new(storage.clone(), cache.clone()));
    let state = Arc::new(ApiState {
        registry: registry.clone(),
        health,
        storage,
        discovery: crate::discovery::Service::new(cfg.advertise_address),
        openapi: crate::openapi::Service::new(cfg.schemas.clone()),
        schemas: cfg.schemas,
        service_accounts: cfg.service_accounts,
    });
    let chain = build_handler_chain(state.clone(), cfg.authenticator, cfg.authorizer, cfg.audit);
    Ok(Api { registry, state, chain, cache, admission_sources })
}

/// Writes the system namespaces that are missing, as kube-apiserver's
/// bootstrap controller creates them: with the defaulted name label, which
/// its manager (`kube-apiserver`, an Update entry) owns.
async fn bootstrap_namespaces(storage: &dyn Storage) -> anyhow::Result<()> {
    for ns in SYSTEM_NAMESPACES {
        let now = crate::meta::now();
        let managed = json!([{
            "manager": "kube-apiserver", "operation": "Update", "apiVersion": "v1", "time": now, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}},
        }]);
        let obj = json!({
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": ns, "uid": crate::meta::new_uid(), "creationTimestamp": now, "labels": {"kubernetes.io/metadata.name": ns}, "managedFields": managed},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        match storage.create(&crate::storage::keys::namespace(ns), obj).await {
            Ok(_) | Err(crate::storage::Error::AlreadyExists) => {}
            Err(e) => return Err(anyhow::anyhow!("create namespace {ns}: {e}")),
        }
    }
    Ok(())
}

/// The authenticators, in kube's shape (see [`crate::authn`]): client
/// certificates, then `--token-auth-file` tokens, JWT issuers (`--oidc-*`,
/// `--authentication-config`) and the token webhook, then anonymous access
/// for requests without credentials as `--anonymous-auth` says.
///
/// # Errors
/// An unreadable or malformed token file, bad OIDC or webhook flags.
fn authenticator(opts: &Options, service_accounts: Arc<crate::authn::service_account::Tokens>) -> anyhow::Result<Arc<dyn crate::authn::Authenticator>> {
    use crate::authn::{token_file::TokenFile, x509::X509, Authenticator, Union};
    let mut members: Vec<Arc<dyn Authenticator>> = vec![Arc::new(X509)];
    if let Some(path) = &opts.token_auth_file {
        members.push(Arc::new(TokenFile::read(path).map_err(|e| anyhow::anyhow!("--token-auth-file: {e}"))?));
    }
    members.push(service_accounts);
    members.extend(crate::authn::oidc::authenticators(&opts.oidc).map_err(|e| anyhow::anyhow!(e))?);
    members.extend(opts.token_webhook.authenticator().map_err(|e| anyhow::anyhow!(e))?);
    members.push(Arc::new(crate::authn::UnknownBearerToken));
    let credentials = Arc::new(Union::new(members));
    Ok(Arc::new(Union::fail_on_error(vec![credentials, anonymous(opts)])))
}

/// The anonymous authenticator of `--anonymous-auth` (see
/// [`crate::authn::anonymous`]): everyone without credentials, only the
/// public info paths while `AlwaysAllow` is a mode, or nobody.
fn anonymous(opts: &Options) -> Arc<dyn crate::authn::Authenticator> {
    use crate::authn::anonymous::{Anonymous, PublicInfo};
    use crate::authn::Union;
    if !opts.anonymous_auth {
        Arc::new(Union::new(Vec::new()))
    } else if opts.authorization_mode.iter().any(|m| m.trim() == "AlwaysAllow") {
        Arc::new(PublicInfo)
    } else {
        Arc::new(Anonymous)
    }
}

/// The ServiceAccount token flags, keys read (or generated in `pki_dir`).
///
/// # Errors
/// Unreadable or unsupported key files.
fn service_account_config(opts: &Options, pki_dir: &Path) -> anyhow::Result<crate::authn::service_account::Config> {
    use crate::authn::service_account::{Config, Keys, DEFAULT_ISSUER};
    let keys = Keys::load(opts.service_account_signing_key_file.as_deref(), &opts.service_account_key_file, pki_dir)?;
    let issuers = if opts.service_account_issuer.is_empty() { vec![DEFAULT_ISSUER.to_string()] } else { opts.service_account_issuer.clone() };
    let api_audiences = if opts.api_audiences.is_empty() { issuers.clone() } else { opts.api_audiences.clone() };
    Ok(Config { issuers, api_audiences, max_expiration: opts.service_account_max_token_expiration, keys })
}

/// Runs the server until the process is stopped.
///
/// # Errors
/// Bad flags, unreadable certificates, an unreachable store or a port in use.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    std::fs::create_dir_all(&opts.data_dir).with_context(|| format!("create {}", opts.data_dir.display()))?;

    let generated = match &opts.pki_dir {
        Some(dir) => crate::pki::ensure_in(dir, std::slice::from_ref(&opts.bind_address))?,
        None => crate::pki::ensure(&opts.data_dir, std::slice::from_ref(&opts.bind_address))?,
    };
    let (cert, key) = match (&opts.tls_cert_file, &opts.tls_private_key_file) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (None, None) => (generated.serving_cert.clone(), generated.serving_key.clone()),
        _ => anyhow::bail!("--tls-cert-file and --tls-private-key-file go together"),
    };
    let client_ca = opts.client_ca_file.clone().unwrap_or_else(|| generated.ca_cert.clone());
    let (tls, client_verifier) = tls_config(&cert, &key, &client_ca)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));

    let pki_dir = opts.pki_dir.clone().unwrap_or_else(|| opts.data_dir.join("pki"));
    let sa_config = service_account_config(&opts, &pki_dir)?;
    let audit = opts.audit.build()?;
    let crate::authz::FromModes { authorizer, rbac, node: node_graph } =
        crate::authz::from_modes_with_webhook(&opts.authorization_mode, opts.authorization_webhook.authorizer()?).map_err(|e| anyhow::anyhow!("--authorization-mode: {e}"))?;
    // Checked before the store starts, so a bad flag fails fast.
    crate::admission::plugins::enabled(&opts.enable_admission_plugins, &opts.disable_admission_plugins)?;
    let admission_config = match &opts.admission_control_config_file {
        Some(path) => crate::admission::config::AdmissionConfig::load(path).map_err(|e| anyhow::anyhow!("--admission-control-config-file: {e}"))?,
        None => Default::default(),
    };
    crate::admission::plugins::check_config(&admission_config)?;
    let Opened { storage, member } = open_storage(&opts).await?;
    let service_accounts = Arc::new(crate::authn::service_account::Tokens::new(sa_config, storage.clone()));
    let authenticator = authenticator(&opts, service_accounts.clone())?;

    let listener = TcpListener::bind((opts.bind_address.as_str(), opts.secure_port)).await.with_context(|| format!("listen on {}:{}", opts.bind_address, opts.secure_port))?;
    let addr: SocketAddr = listener.local_addr()?;
    let host = if addr.ip().is_unspecified() { "127.0.0.1".to_string() } else { addr.ip().to_string() };
    let host_port = if host.contains(':') { format!("[{host}]:{}", addr.port()) } else { format!("{host}:{}", addr.port()) };
    let server_url = format!("https://{host_port}");
    let kubeconfig = opts.data_dir.join("admin.kubeconfig");
    crate::pki::write_kubeconfig(&kubeconfig, &server_url, &generated.ca_cert, &generated.admin_cert, &generated.admin_key)?;
    let kubeconfig_abs = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);

    // Parsing and compiling the built-in schemas takes a while: not on an
    // async thread.
    let schemas = tokio::task::spawn_blocking(crate::schema::SchemaStore::builtin).await?;
    let api = build_api(
        storage.clone(),
        ApiConfig {
            schemas,
            watch_cache: opts.watch_cache,
            watch_cache_size: opts.default_watch_cache_size,
            enable_admission_plugins: opts.enable_admission_plugins.clone(),
            disable_admission_plugins: opts.disable_admission_plugins.clone(),
            admission_config,
            authenticator,
            authorizer,
            rbac: rbac.clone(),
            advertise_address: host_port.clone(),
            audit: audit.clone(),
            service_accounts: Some(service_accounts.clone()),
        },
    )?;
    // Build the OpenAPI documents off the request path, so the first
    // kubectl apply does not wait for them.
    let warm = api.state.clone();
    tokio::task::spawn_blocking(move || warm.openapi.v3_root(&warm.registry.catalog()));
    let chain = api.chain.clone();
    // The store may wait for its peers for a long time: serve health checks
    // meanwhile, and the API once it is up.
    let node = member.as_ref().map(|m| m.node.clone());
    let health = api.state.health.clone();
    let rbac = rbac.map(|rbac| {
        health.set_rbac_bootstrap_pending(true);
        crate::controllers::RbacFeed { rbac, health: health.clone() }
    });
    let sa_feed = crate::controllers::service_account::Feed {
        tokens: service_accounts.clone(),
        root_ca: std::fs::read_to_string(&generated.ca_cert).with_context(|| format!("read {}", generated.ca_cert.display()))?,
    };
    let mut startup = Some(tokio::spawn(start_up(
        member,
        storage,
        api.registry.clone(),
        health.clone(),
        opts.name.clone(),
        Feeds { admission: api.admission_sources.clone(), rbac, node: node_graph, service_accounts: sa_feed },
    )));
    let mut controllers = None;

    println!("serving on {server_url}");
    println!("to use kubectl: export KUBECONFIG={}", kubeconfig_abs.display());
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let limits = opts.serving_limits();
    let gate = crate::serving::Gate::new(limits.max_connections);
    // Connections end gracefully when this becomes true.
    let closing = tokio::sync::watch::Sender::new(false);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("SIGTERM handler")?;
    // Set by the first SIGTERM or SIGINT: until then the server serves
    // with `/readyz` failing.
    let mut stop_accepting_at: Option<tokio::time::Instant> = None;
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    continue;
                }
            },
            done = async {
                match startup.as_mut() {
                    Some(t) => t.await,
                    None => std::future::pending().await,
                }
            }, if startup.is_some() => {
                startup = None;
                controllers = Some(done.context("start-up task")??);
                continue;
            },
            _ = async {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {},
                    _ = terminate.recv() => {},
                }
            } => {
                if stop_accepting_at.is_some() {
                    // A second signal: the operator does not want to wait
                    // (kube-apiserver exits at once with status 1 too).
                    tracing::warn!("second termination signal: exiting at once");
                    std::process::exit(1);
                }
                health.begin_shutdown();
                tracing::warn!("shutting down: /readyz fails; still serving for {:?} (--shutdown-delay-duration)", opts.shutdown_delay_duration);
                let now = tokio::time::Instant::now();
                // A delay too long for the clock means: until a second signal.
                stop_accepting_at = Some(now.checked_add(opts.shutdown_delay_duration).unwrap_or(now + std::time::Duration::from_secs(100 * 365 * 24 * 3600)));
                continue;
            },
            _ = async {
                match stop_accepting_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => break,
        };
        let Some(slot) = gate.admit("HTTPS") else {
            drop(tcp);
            continue;
        };
        let acceptor = acceptor.clone();
        let chain = chain.clone();
        let client_verifier = client_verifier.clone();
        let limits = limits.clone();
        let closing = closing.subscribe();
        tokio::spawn(async move {
            let _slot = slot;
            let _ = tcp.set_nodelay(true);
            let tls = match tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::debug!("TLS handshake with {peer}: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!("TLS handshake with {peer}: timed out after {:?}", limits.tls_handshake_timeout);
                    return;
                }
            };
            let presented = tls.get_ref().1.peer_certificates().map(|c| c.iter().map(|c| c.clone().into_owned()).collect()).unwrap_or_default();
            let certs = verify_peer(client_verifier.as_ref(), presented);
            serve_connection(tls, chain, certs, peer, &limits, closing).await;
        });
    }
    shut_down(listener, &gate, &closing, &health, startup, controllers, node).await;
    if let Some(a) = audit {
        a.shutdown(crate::serving::SHUTDOWN_TIMEOUT).await;
    }
    Ok(())
}

/// The rest of a graceful shutdown, after `--shutdown-delay-duration`
/// (kube's generic server does the same steps): stop accepting; tell every
/// connection to finish (HTTP/2 GOAWAY, HTTP/1 close after the response in
/// flight); end the watches with a last BOOKMARK; wait for the requests in
/// flight (at most [`crate::serving::SHUTDOWN_TIMEOUT`]); stop the
/// controllers; move the embedded store's leadership to another member so
/// the cluster does not wait an election timeout; stop the member.
async fn shut_down(
    listener: TcpListener,
    gate: &crate::serving::Gate,
    closing: &tokio::sync::watch::Sender<bool>,
    health: &crate::health::Health,
    startup: Option<tokio::task::JoinHandle<anyhow::Result<crate::controllers::Controllers>>>,
    controllers: Option<crate::controllers::Controllers>,
    node: Option<raftstore::raft::RaftNode>,
) {
    drop(listener);
    closing.send_replace(true);
    health.end_watches();
    let began = std::time::Instant::now();
    while gate.open() > 0 && began.elapsed() < crate::serving::SHUTDOWN_TIMEOUT {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if gate.open() > 0 {
        tracing::warn!("shutting down with {} connections still open after {:?}", gate.open(), crate::serving::SHUTDOWN_TIMEOUT);
    }
    if let Some(t) = startup {
        t.abort();
    }
    if let Some(c) = controllers {
        c.stop().await;
    }
    if let Some(node) = node {
        // Hands the store's leadership over first, as etcd's leader does.
        node.stop().await;
    }
    tracing::info!("shut down");
}

async fn serve_connection<IO>(
    io: IO,
    chain: Arc<dyn Handler>,
    certs: Result<PeerCertificates, UnverifiedCertificate>,
    peer: SocketAddr,
    limits: &crate::serving::Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = crate::serving::Activity::new();
    let seen = activity.clone();
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let chain = chain.clone();
        let certs = certs.clone();
        // In flight until the response body is sent or dropped.
        let in_flight = seen.begin();
        async move {
            let mut req = req.map(|b| b.map_err(std::io::Error::other).boxed());
            req.extensions_mut().insert(crate::endpoints::filters::audit::RemoteAddr(peer));
            match certs {
                Ok(c) => {
                    req.extensions_mut().insert(c);
                }
                Err(u) => {
                    req.extensions_mut().insert(u);
                }
            }
            let head_h2 = req.method() == http::Method::HEAD && req.version() == http::Version::HTTP_2;
            let mut resp = chain.call(req).await;
            if head_h2 {
                // A HEAD answer carries no body; over HTTP/2 a
                // content-length that its DATA frames do not match makes
                // the stream a PROTOCOL_ERROR, so it goes with the body.
                resp.headers_mut().remove(http::header::CONTENT_LENGTH);
                *resp.body_mut() = crate::endpoints::responses::full(bytes::Bytes::new());
            }
            let resp = resp.map(|body| {
                body.map_frame(move |f| {
                    let _ = &in_flight;
                    f
                })
                .boxed()
            });
            Ok::<_, Infallible>(resp)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(limits.read_header_timeout);
    builder.http2().timer(hyper_util::rt::TokioTimer::new()).max_concurrent_streams(limits.http2_max_streams);
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    // Checked at a fraction of the idle timeout, so a connection closes
    // within about 1.25 times it.
    let tick = (limits.idle_timeout / 4).max(std::time::Duration::from_millis(100));
    let result = loop {
        tokio::select! {
            r = conn.as_mut() => break r,
            () = async { drop(closing.wait_for(|c| *c).await) } => {
                // The server shuts down: requests in flight finish, then the
                // connection closes (HTTP/2 GOAWAY).
                conn.as_mut().graceful_shutdown();
                break conn.as_mut().await;
            }
            _ = tokio::time::sleep(tick) => {
                // A connection that has had no request yet gets the idle
                // timeout too; hyper bounds an HTTP/1 head on its own.
                if activity.time_left(limits.idle_timeout, limits.idle_timeout) == Some(std::time::Duration::ZERO) {
                    conn.as_mut().graceful_shutdown();
                    break match tokio::time::timeout(crate::serving::GRACE, conn.as_mut()).await {
                        Ok(r) => r,
                        Err(_) => Ok(()),
                    };
                }
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection: {e}");
    }
}
