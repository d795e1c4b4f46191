//! The HTTPS client the server uses to ask other servers: authentication
//! and authorization webhooks, admission webhooks, the audit webhook
//! backend and OIDC issuers.
//!
//! A webhook is described, as in kube-apiserver, by a kubeconfig file
//! (`--authentication-token-webhook-config-file`,
//! `--authorization-webhook-config-file`; kube's `webhook.LoadKubeconfig`):
//!
//! ```yaml
//! clusters:
//! - name: hook
//!   cluster:
//!     server: https://hook.example:8443/authenticate   # the URL POSTed to
//!     certificate-authority: ca.crt                     # or certificate-authority-data (base64 PEM)
//! users:
//! - name: apiserver
//!   user:
//!     client-certificate: client.crt                    # or client-certificate-data
//!     client-key: client.key                            # or client-key-data
//!     token: secret                                     # or tokenFile: a bearer token
//! current-context: hook                                 # optional; else the first cluster and user
//! contexts:
//! - name: hook
//!   context: {cluster: hook, user: apiserver}
//! ```
//!
//! Relative file names are relative to the kubeconfig's folder (client-go's
//! rule). The CA is required: system roots are not built in. Requests are
//! JSON over HTTP/1.1 on pooled connections, each bounded by the client's
//! timeout.
//!
//! Admission webhooks ([`Client::for_admission`]) are described by their
//! configuration's `clientConfig` instead: HTTPS only, the `caBundle` as
//! the CA, and for a `service` reference a [`Resolve`] that picks the
//! address to dial for the service's DNS name (`<name>.<namespace>.svc`)
//! while TLS still checks that name. Their calls ([`Client::post_raw`])
//! return any answer with its status code, and word transport failures as
//! Go's `net/http` does (`dial tcp 127.0.0.1:1: connect: connection
//! refused`, `context deadline exceeded`), since kube-apiserver's
//! messages quote them.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// Why a call to another server failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig or the TLS material is unusable (the server refuses to
    /// start).
    #[error("{0}")]
    Config(String),
    /// No answer: connection refused, TLS failure, timeout.
    #[error("{0}")]
    Transport(String),
    /// An answer with a status code other than 2xx; the body is cut to
    /// 1 KiB.
    #[error("the server responded with the status code {code} but did not return more information: {body}")]
    Status {
        /// The HTTP status code.
        code: u16,
        /// The start of the response body.
        body: String,
    },
    /// A 2xx answer whose body is not JSON.
    #[error("decoding the response: {0}")]
    Decode(String),
    /// No complete answer within the call's timeout ([`Client::post_raw`];
    /// Go's words for a context that ran out).
    #[error("context deadline exceeded")]
    Timeout,
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The TLS material of a client: the CA (PEM) that signs the servers'
/// certificates and, optionally, a client certificate chain and key (PEM).
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// PEM certificates to trust.
    pub ca: Vec<u8>,
    /// PEM certificate chain and PEM private key presented to the server.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl Tls {
    /// The rustls configuration of this material, on aws-lc-rs (the
    /// workspace's one provider).
    ///
    /// # Errors
    /// [`Error::Config`]: no PEM certificate in the CA, or a client
    /// certificate or key that cannot be read.
    pub fn client_config(&self) -> Result<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        let mut trusted = Vec::new();
        for cert in CertificateDer::pem_slice_iter(&self.ca) {
            let cert = cert.map_err(|e| Error::Config(format!("certificate authority: {e}")))?;
            trusted.push(cert.clone());
            roots.add(cert).map_err(|e| Error::Config(format!("certificate authority: {e}")))?;
        }
        if roots.is_empty() {
            return Err(Error::Config("certificate authority: no PEM certificate in it".into()));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().map_err(|e| Error::Config(format!("certificate authority: {e}")))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(BundleVerifier { webpki, trusted }));
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert).collect::<std::result::Result<_, _>>().map_err(|e| Error::Config(format!("client certificate: {e}")))?;
                if chain.is_empty() {
                    return Err(Error::Config("client certificate: no PEM certificate in it".into()));
                }
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| Error::Config(format!("client key: {e}")))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| Error::Config(format!("client certificate: {e}")))
            }
        }
    }
}

/// A JSON client of one server (a webhook) or of any URL under one CA (an
/// OIDC issuer). Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct Client {
    http: hyper_util::client::legacy::Client<HttpsConnector<Connector>, Full<Bytes>>,
    server: String,
    token: Option<String>,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("server", &self.server).field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl Client {
    /// A client of `server` (the URL [`Client::post_json`] posts to; may be
    /// empty when only [`Client::get_json`] is used) trusting `tls`, with a
    /// bearer `token` on every request and `timeout` per request.
    ///
    /// # Errors
    /// As [`Tls::client_config`].
    pub fn new(server: &str, tls: &Tls, token: Option<String>, timeout: Duration) -> Result<Client> {
        let mut plain = HttpConnector::new();
        plain.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls.client_config()?).https_or_http().enable_http1().wrap_connector(Connector::Plain(plain));
        let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Client { http, server: server.to_string(), token, timeout })
    }

    /// A client of an admission webhook (kube's `webhookutil.ClientManager`
    /// client): HTTPS only over HTTP/1.1, trusting the PEM certificates of
    /// `ca_bundle` (a webhook without one gets a CA of its own that signs
    /// nothing, so every server is "signed by unknown authority", as kube
    /// answers when the system roots do not know the server), dialing
    /// through `resolver` when given (a `service` reference). Calls go
    /// through [`Client::post_raw`], whose timeout is per call.
    ///
    /// # Errors
    /// [`Error::Config`]: a bundle with unreadable PEM or no certificate.
    pub fn for_admission(ca_bundle: &[u8], resolver: Option<Arc<dyn Resolve>>) -> Result<Client> {
        let ca = if ca_bundle.iter().all(u8::is_ascii_whitespace) { PLACEHOLDER_CA.get_or_init(placeholder_ca).clone() } else { ca_bundle.to_vec() };
        let tls = Tls { ca, identity: None };
        let connector = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls.client_config()?).https_only().enable_http1().wrap_connector(Connector::Dialing(resolver));
        let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Client { http, server: String::new(), token: None, timeout: Duration::from_secs(30) })
    }

    /// The client a webhook kubeconfig file describes (see the module doc).
    ///
    /// # Errors
    /// [`Error::Config`]: the file cannot be read or parsed, has no cluster
    /// or server, names a context, cluster or user it lacks, or its TLS
    /// files are unusable.
    pub fn from_kubeconfig(path: &Path, timeout: Duration) -> Result<Client> {
        let text = std::fs::read(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let cfg = Kubeconfig::parse(&text, path.parent().unwrap_or(Path::new("."))).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        Client::new(&cfg.server, &cfg.tls, cfg.token, timeout).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// The URL [`Client::post_json`] posts to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// POSTs `body` as JSON to the server URL and returns the JSON answer.
    ///
    /// # Errors
    /// [`Error::Transport`] (including the timeout), [`Error::Status`] for a
    /// non-2xx answer, [`Error::Decode`] for a body that is not JSON.
    pub async fn post_json(&self, body: &serde_json::Value) -> Result<serde_json::Value> {
        let bytes = serde_json::to_vec(body).map_err(|e| Error::Decode(e.to_string()))?;
        self.call(http::Method::POST, &self.server, Some(bytes)).await
    }

    /// GETs `url` and returns its JSON.
    ///
    /// # Errors
    /// As [`Client::post_json`].
    pub async fn get_json(&self, url: &str) -> Result<serde_json::Value> {
        self.call(http::Method::GET, url, None).await
    }

    /// POSTs `body` (JSON) to `url` and returns the answer whatever its
    /// status code, all within `timeout` (connecting, TLS, the request and
    /// the whole body).
    ///
    /// # Errors
    /// [`Error::Timeout`] when `timeout` runs out; [`Error::Transport`] with
    /// the failure in Go's `net/http` words (see [`go_transport_error`]) for
    /// any other failure before the whole answer is in.
    pub async fn post_raw(&self, url: &str, body: Vec<u8>, timeout: Duration) -> Result<Reply> {
        let req = http::Request::builder()
            .method(http::Method::POST)
            .uri(url)
            .header(http::header::ACCEPT, "application/json, */*")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Transport(format!("parse {url:?}: {e}")))?;
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| Error::Transport(go_transport_error(&e)))?;
            let code = resp.status().as_u16();
            let content_type = resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            let body = resp.into_body().collect().await.map_err(|e| Error::Transport(go_transport_error(&e)))?.to_bytes();
            Ok::<_, Error>(Reply { code, content_type, body })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| Error::Timeout)?
    }

    async fn call(&self, method: http::Method, url: &str, body: Option<Vec<u8>>) -> Result<serde_json::Value> {
        let mut req = http::Request::builder().method(method).uri(url).header(http::header::ACCEPT, "application/json");
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        if let Some(t) = &self.token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| Error::Transport(format!("{url}: {e}")))?;
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| Error::Transport(format!("{url}: {}", error_chain(&e))))?;
            let code = resp.status().as_u16();
            let bytes = resp.into_body().collect().await.map_err(|e| Error::Transport(format!("{url}: {e}")))?.to_bytes();
            Ok::<_, Error>((code, bytes))
        };
        let (code, bytes) = tokio::time::timeout(self.timeout, exchange).await.map_err(|_| Error::Transport(format!("{url}: timed out after {:?}", self.timeout)))??;
        if !(200..300).contains(&code) {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).into_owned();
            return Err(Error::Status { code, body: text });
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode(e.to_string()))
    }
}

/// A whole answer of [`Client::post_raw`].
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status code.
    pub code: u16,
    /// The `Content-Type` header (empty when absent).
    pub content_type: String,
    /// The body.
    pub body: Bytes,
}

/// Picks the address to dial for a host name (an admission webhook's
/// `service` reference resolves through the service's EndpointSlices).
pub trait Resolve: Send + Sync {
    /// The address for `host` (without port) and `port`: `None` to dial
    /// the host itself, `Some(Err(message))` to fail the dial with
    /// `message` (kube's resolver errors, such as `no endpoints available
    /// for service "x"`).
    fn resolve(&self, host: &str, port: u16) -> Option<std::result::Result<SocketAddr, String>>;
}

/// The TCP connector under TLS: hyper-util's, or ours, which resolves
/// through a [`Resolve`] and words its failures as Go does.
#[derive(Clone)]
enum Connector {
    Plain(HttpConnector),
    Dialing(Option<Arc<dyn Resolve>>),
}

/// A dial failure, already in Go's words.
#[derive(Debug)]
struct DialError(String);

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DialError {}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Io = hyper_util::rt::TokioIo<tokio::net::TcpStream>;

impl tower::Service<http::Uri> for Connector {
    type Response = Io;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<Io, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<std::result::Result<(), BoxError>> {
        match self {
            Connector::Plain(c) => c.poll_ready(cx).map_err(Into::into),
            Connector::Dialing(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        match self {
            Connector::Plain(c) => {
                let fut = c.call(uri);
                Box::pin(async move { fut.await.map_err(Into::into) })
            }
            Connector::Dialing(resolver) => {
                let resolver = resolver.clone();
                Box::pin(async move { dial(&uri, resolver.as_deref()).await.map_err(|e| Box::new(e) as BoxError) })
            }
        }
    }
}

/// Connects to the host of `uri` (or where `resolver` says), trying each
/// address of the host in turn.
async fn dial(uri: &http::Uri, resolver: Option<&dyn Resolve>) -> std::result::Result<Io, DialError> {
    let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("http") { 80 } else { 443 });
    let addrs: Vec<SocketAddr> = match resolver.and_then(|r| r.resolve(&host, port)) {
        Some(Ok(addr)) => vec![addr],
        Some(Err(message)) => return Err(DialError(message)),
        None => match tokio::net::lookup_host((host.as_str(), port)).await {
            Ok(a) => a.collect(),
            Err(_) => return Err(DialError(format!("dial tcp: lookup {host}: no such host"))),
        },
    };
    let mut last = DialError(format!("dial tcp: lookup {host}: no such host"));
    for addr in addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(tcp) => {
                let _ = tcp.set_nodelay(true);
                return Ok(hyper_util::rt::TokioIo::new(tcp));
            }
            Err(e) => last = DialError(format!("dial tcp {addr}: {}", go_syscall_error(&e))),
        }
    }
    Err(last)
}

/// An OS error as Go's `net` package prints it after `dial tcp <addr>: `.
fn go_syscall_error(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        ErrorKind::ConnectionReset => "connect: connection reset by peer".into(),
        ErrorKind::TimedOut => "i/o timeout".into(),
        ErrorKind::AddrNotAvailable => "connect: cannot assign requested address".into(),
        _ if e.raw_os_error() == Some(113) => "connect: no route to host".into(),
        _ if e.raw_os_error() == Some(101) => "connect: network is unreachable".into(),
        _ => format!("connect: {e}"),
    }
}

/// A failed exchange in the words Go's HTTP client uses after
/// `Post "<url>": ` (kube-apiserver quotes them in its webhook errors): the
/// dial failures of [`Client::for_admission`] clients as they are, TLS
/// verification failures as `tls: failed to verify certificate: x509: …`,
/// a connection closed before the answer as `EOF`; anything else as the
/// error and its sources.
pub fn go_transport_error(e: &(dyn std::error::Error + 'static)) -> String {
    go_words(e, 0).unwrap_or_else(|| error_chain(e))
}

/// Go's words for the first error of `e`'s chain that has them; an
/// `io::Error` is looked into as well (hyper-rustls wraps the TLS error in
/// two of them, and `io::Error::source` skips the one it wraps).
fn go_words(e: &(dyn std::error::Error + 'static), depth: usize) -> Option<String> {
    if depth > 16 {
        return None;
    }
    if let Some(d) = e.downcast_ref::<DialError>() {
        return Some(d.0.clone());
    }
    if let Some(t) = e.downcast_ref::<rustls::Error>() {
        return Some(go_tls_error(t));
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        if let Some(inner) = io.get_ref() {
            if let Some(words) = go_words(inner, depth + 1) {
                return Some(words);
            }
        }
        if io.kind() == std::io::ErrorKind::UnexpectedEof {
            return Some("EOF".into());
        }
    }
    if let Some(h) = e.downcast_ref::<hyper::Error>() {
        if h.is_incomplete_message() || h.is_canceled() {
            return Some("EOF".into());
        }
    }
    e.source().and_then(|s| go_words(s, depth + 1))
}

/// Server certificates checked as Go's `crypto/x509` checks them against a
/// caBundle: by webpki's path building, and besides it a serving
/// certificate that is itself one of the bundle's certificates (a
/// self-signed certificate, often marked CA:TRUE, used as its own caBundle,
/// as many webhook setups do), which Go accepts once its validity period
/// and host name check out and webpki refuses (`CaUsedAsEndEntity`).
#[derive(Debug)]
struct BundleVerifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    trusted: Vec<CertificateDer<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(_) if self.trusted.iter().any(|t| t.as_ref() == end_entity.as_ref()) => {
                check_trusted_leaf(end_entity, server_name, now)?;
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// What Go still checks of a serving certificate found among the trusted
/// ones: its validity period and that it names `server_name` (an IP
/// address SAN, or a DNS SAN with at most a leading `*.` label).
fn check_trusted_leaf(der: &CertificateDer<'_>, server_name: &rustls::pki_types::ServerName<'_>, now: rustls::pki_types::UnixTime) -> std::result::Result<(), rustls::Error> {
    use rustls::CertificateError as C;
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).map_err(|_| rustls::Error::InvalidCertificate(C::BadEncoding))?;
    let t = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = cert.validity();
    if t < validity.not_before.timestamp() || t > validity.not_after.timestamp() {
        return Err(rustls::Error::InvalidCertificate(C::Expired));
    }
    let names: Vec<GeneralName<'_>> = cert.subject_alternative_name().ok().flatten().map(|s| s.value.general_names.clone()).unwrap_or_default();
    let named = match server_name {
        rustls::pki_types::ServerName::IpAddress(ip) => {
            let want = std::net::IpAddr::from(*ip);
            names.iter().any(|n| match n {
                GeneralName::IPAddress(b) => match b.len() {
                    4 => <[u8; 4]>::try_from(*b).is_ok_and(|a| std::net::IpAddr::from(a) == want),
                    16 => <[u8; 16]>::try_from(*b).is_ok_and(|a| std::net::IpAddr::from(a) == want),
                    _ => false,
                },
                _ => false,
            })
        }
        rustls::pki_types::ServerName::DnsName(d) => {
            let host = d.as_ref().trim_end_matches('.').to_ascii_lowercase();
            names.iter().any(|n| match n {
                GeneralName::DNSName(pattern) => {
                    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
                    match pattern.strip_prefix("*.") {
                        Some(rest) => host.split_once('.').is_some_and(|(first, tail)| !first.is_empty() && tail == rest),
                        None => pattern == host,
                    }
                }
                _ => false,
            })
        }
        _ => false,
    };
    if named {
        Ok(())
    } else {
        Err(rustls::Error::InvalidCertificate(C::NotValidForName))
    }
}

/// A rustls failure in the words of Go's `crypto/tls` and `crypto/x509`.
fn go_tls_error(e: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    let x509 = match e {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => "certificate signed by unknown authority".to_string(),
        rustls::Error::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => "certificate is not valid for the requested name".to_string(),
        rustls::Error::InvalidCertificate(C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. }) => "certificate has expired or is not yet valid".to_string(),
        rustls::Error::InvalidCertificate(C::BadEncoding) => "malformed certificate".to_string(),
        rustls::Error::InvalidCertificate(C::Revoked) => "certificate has been revoked".to_string(),
        rustls::Error::InvalidCertificate(C::InvalidPurpose | C::InvalidPurposeContext { .. }) => "certificate specifies an incompatible key usage".to_string(),
        rustls::Error::InvalidCertificate(C::BadSignature) => "certificate signature is invalid".to_string(),
        // A CA certificate served as the server's own that the bundle does
        // not hold: Go finds no chain to a trusted root.
        rustls::Error::InvalidCertificate(C::Other(o)) if format!("{o:?}").contains("CaUsedAsEndEntity") => "certificate signed by unknown authority".to_string(),
        // The rest (webpki's own reasons) as rustls words them.
        other @ rustls::Error::InvalidCertificate(_) => return format!("tls: failed to verify certificate: x509: {}", other.to_string().trim_start_matches("invalid peer certificate: ")),
        other => return format!("tls: {other}"),
    };
    format!("tls: failed to verify certificate: x509: {x509}")
}

/// An error with its sources, so "client error (Connect)" says why.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// What a webhook kubeconfig says: the server URL, TLS and bearer token.
#[derive(Debug, Clone, Default)]
pub struct Kubeconfig {
    /// `clusters[].cluster.server`.
    pub server: String,
    /// The CA and client certificate.
    pub tls: Tls,
    /// `users[].user.token` (or the contents of `tokenFile`).
    pub token: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    users: Vec<Named<UserEntry>>,
    #[serde(default)]
    contexts: Vec<Named<ContextEntry>>,
    #[serde(default)]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    #[serde(default)]
    name: String,
    #[serde(flatten)]
    value: T,
}

#[derive(Deserialize, Default)]
struct ClusterEntry {
    #[serde(default)]
    cluster: Cluster,
}

#[derive(Deserialize, Default)]
struct UserEntry {
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
struct ContextEntry {
    #[serde(default)]
    context: Context,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
struct Context {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

impl Kubeconfig {
    /// Parses a kubeconfig's YAML (or JSON); relative paths are read from
    /// `dir`.
    ///
    /// # Errors
    /// Unparseable YAML, no cluster or no server, a context naming a
    /// cluster or user the file lacks, `insecure-skip-tls-verify` (refused),
    /// a `https` server without a CA, unreadable files, bad base64.
    pub fn parse(text: &[u8], dir: &Path) -> std::result::Result<Kubeconfig, String> {
        let file: File = serde_saphyr::from_slice(text).map_err(|e| format!("not a kubeconfig: {e}"))?;
        let (cluster_name, user_name) = if file.current_context.is_empty() {
            (None, None)
        } else {
            let ctx = file.contexts.iter().find(|c| c.name == file.current_context).ok_or_else(|| format!("context {:?} not found", file.current_context))?;
            (Some(ctx.value.context.cluster.clone()), Some(ctx.value.context.user.clone()))
        };
        let cluster = match &cluster_name {
            Some(n) => file.clusters.iter().find(|c| &c.name == n).ok_or_else(|| format!("cluster {n:?} not found"))?,
            None => file.clusters.first().ok_or("no cluster in it")?,
        };
        let cluster = &cluster.value.cluster;
        if cluster.server.is_empty() {
            return Err("the cluster has no server".into());
        }
        if cluster.insecure_skip_tls_verify {
            return Err("insecure-skip-tls-verify is not supported; give certificate-authority".into());
        }
        let user = match &user_name {
            Some(n) if !n.is_empty() => Some(&file.users.iter().find(|u| &u.name == n).ok_or_else(|| format!("user {n:?} not found"))?.value.user),
            _ => file.users.first().map(|u| &u.value.user),
        };
        let read = |p: &Path| {
            let p = if p.is_absolute() { p.to_path_buf() } else { dir.join(p) };
            std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))
        };
        let data = |what: &str, s: &str| base64::engine::general_purpose::STANDARD.decode(s.trim()).map_err(|e| format!("{what}: {e}"));
        let ca = match (&cluster.certificate_authority_data, &cluster.certificate_authority) {
            (Some(d), _) => data("certificate-authority-data", d)?,
            (None, Some(p)) => read(p)?,
            (None, None) if cluster.server.starts_with("https://") => return Err("the cluster has no certificate-authority (system roots are not built in)".into()),
            (None, None) => Vec::new(),
        };
        let mut out = Kubeconfig { server: cluster.server.clone(), tls: Tls { ca, identity: None }, token: None };
        if let Some(u) = user {
            let cert = match (&u.client_certificate_data, &u.client_certificate) {
                (Some(d), _) => Some(data("client-certificate-data", d)?),
                (None, Some(p)) => Some(read(p)?),
                _ => None,
            };
            let key = match (&u.client_key_data, &u.client_key) {
                (Some(d), _) => Some(data("client-key-data", d)?),
                (None, Some(p)) => Some(read(p)?),
                _ => None,
            };
            out.tls.identity = match (cert, key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                _ => return Err("client-certificate and client-key go together".into()),
            };
            out.token = match (&u.token, &u.token_file) {
                (Some(t), _) if !t.is_empty() => Some(t.clone()),
                (_, Some(p)) => Some(String::from_utf8_lossy(&read(p)?).trim().to_string()),
                _ => None,
            };
        }
        if out.tls.ca.is_empty() {
            // Plain http: a CA would not be used, but the client wants one.
            out.tls.ca = PLACEHOLDER_CA.get_or_init(placeholder_ca).clone();
        }
        Ok(out)
    }
}

static PLACEHOLDER_CA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

/// A throwaway self-signed CA for `http://` webhooks, which never use it.
fn placeholder_ca() -> Vec<u8> {
    rcgen::KeyPair::generate()
        .ok()
        .and_then(|key| {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).ok()?;
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.self_signed(&key).ok()
        })
        .map(|c| c.pem().into_bytes())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for 127.0.0.1 marked CA:TRUE, as `openssl
    /// req -x509` makes one.
    fn self_signed_ca_leaf() -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap_or_else(|e| panic!("{e}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap_or_else(|e| panic!("{e}")).der().clone()
    }

    #[test]
    fn a_self_signed_ca_serving_as_its_own_bundle_is_trusted_as_go_trusts_it() {
        use rustls::client::danger::ServerCertVerifier as _;
        let leaf = self_signed_ca_leaf();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(leaf.clone()).unwrap_or_else(|e| panic!("{e}"));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap_or_else(|e| panic!("{e}"));
        let v = BundleVerifier { webpki, trusted: vec![leaf.clone()] };
        let name = |n: &str| rustls::pki_types::ServerName::try_from(n.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let now = rustls::pki_types::UnixTime::now();
        assert!(v.verify_server_cert(&leaf, &[], &name("127.0.0.1"), &[], now).is_ok(), "Go accepts a trusted certificate as its own chain");
        let wrong_name = v.verify_server_cert(&leaf, &[], &name("10.0.0.1"), &[], now).err().map(|e| go_tls_error(&e));
        assert_eq!(wrong_name.as_deref(), Some("tls: failed to verify certificate: x509: certificate is not valid for the requested name"));
        // A certificate outside the bundle is still refused.
        let stranger = self_signed_ca_leaf();
        let refused = v.verify_server_cert(&stranger, &[], &name("127.0.0.1"), &[], now).err().map(|e| go_tls_error(&e)).unwrap_or_default();
        assert!(refused.starts_with("tls: failed to verify certificate: x509: "), "{refused}");
        assert!(!refused.contains("Other("), "Rust Debug form: {refused}");
    }

    #[test]
    fn kubeconfig_picks_current_context_and_reads_relative_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ca = placeholder_ca();
        std::fs::write(dir.path().join("ca.crt"), &ca).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("tok"), "s3cret\n").unwrap_or_else(|e| panic!("{e}"));
        let text = "clusters:\n- name: a\n  cluster:\n    server: https://a:1\n- name: b\n  cluster:\n    server: https://b:2/hook\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    tokenFile: tok\ncontexts:\n- name: c\n  context:\n    cluster: b\n    user: u\ncurrent-context: c\n";
        let k = Kubeconfig::parse(text.as_bytes(), dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((k.server.as_str(), k.token.as_deref(), k.tls.ca == ca), ("https://b:2/hook", Some("s3cret"), true));
        // Without a current context: the first cluster, which lacks a CA.
        let err = Kubeconfig::parse(b"clusters:\n- name: a\n  cluster:\n    server: https://a:1\n", dir.path()).err().unwrap_or_default();
        assert!(err.contains("no certificate-authority"), "{err}");
        for (bad, want) in [
            ("clusters: []\n", "no cluster"),
            ("current-context: x\n", "context \"x\" not found"),
            ("clusters:\n- name: a\n  cluster:\n    server: https://a\n    insecure-skip-tls-verify: true\n", "insecure"),
        ] {
            let err = Kubeconfig::parse(bad.as_bytes(), dir.path()).err().unwrap_or_default();
            assert!(err.contains(want), "{bad}: {err}");
        }
    }
}
