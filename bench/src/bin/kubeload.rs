//! `kubeload`: a Kubernetes-API workload against a running `apiserver` (or
//! any kube-apiserver): create, get and list of ConfigMaps and Deployments
//! over HTTPS with the admin client certificate, reporting ops/s and
//! latency percentiles per phase.
//!
//! ```text
//! kubeload --kubeconfig <data-dir>/admin.kubeconfig --objects 1000 --clients 16 --lists 50
//! ```
//!
//! Every client holds its own HTTP/2 connection and sends one request at a
//! time (closed loop). The run works in a fresh namespace, deleted at the
//! end. Phases, each timed on its own: create N ConfigMaps, get each of them,
//! list them L times (one unpaginated list of N objects per op), then the
//! same for Deployments. With `--apply`, each kind gets a last phase: a
//! server-side apply (`application/apply-patch+yaml`, field manager
//! `kubeload`, forced) of every object with one label added. Non-2xx
//! answers are counted as errors, and the run exits non-zero if any phase
//! had one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::Engine as _;
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "Kubernetes API workload: create/get/list of ConfigMaps and Deployments")]
struct Cli {
    /// Kubeconfig with the server URL, CA and client certificate (inline
    /// `*-data` fields, as `apiserver` writes `<data-dir>/admin.kubeconfig`).
    #[arg(long)]
    kubeconfig: std::path::PathBuf,
    /// Objects created (and read back) per kind.
    #[arg(long, default_value_t = 1000)]
    objects: u64,
    /// Concurrent clients, one HTTP/2 connection each.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// List requests per kind (each lists every object of the kind).
    #[arg(long, default_value_t = 50)]
    lists: u64,
    /// Get requests per kind, each of a random object (default: as many
    /// as `--objects`).
    #[arg(long)]
    gets: Option<u64>,
    /// Per-request timeout, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Print one JSON line per phase instead of a table.
    #[arg(long)]
    json: bool,
    /// Add a server-side apply phase per kind (each object applied once,
    /// with a new label, as manager `kubeload`).
    #[arg(long)]
    apply: bool,
}

/// Where and how to connect.
struct Target {
    base: String,
    host: String,
    addr: String,
    tls: Arc<rustls::ClientConfig>,
}

fn field<'a>(v: &'a Value, path: &[&str]) -> anyhow::Result<&'a str> {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().with_context(|| format!("kubeconfig has no {}", path.join(".")))
}

fn b64(s: &str) -> anyhow::Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(s.trim()).context("bad base64 in kubeconfig")
}

impl Target {
    /// Reads the first cluster and user of a kubeconfig.
    fn from_kubeconfig(path: &std::path::Path) -> anyhow::Result<Target> {
        let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let cfg: Value = serde_saphyr::from_str(&text).context("parse kubeconfig")?;
        let cluster = &cfg["clusters"][0]["cluster"];
        let user = &cfg["users"][0]["user"];
        let server = field(cluster, &["server"])?.trim_end_matches('/').to_string();
        let url = url::Url::parse(&server).context("server URL")?;
        let host = url.host_str().context("server URL has no host")?.to_string();
        let addr = format!("{host}:{}", url.port_or_known_default().unwrap_or(443));

        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&b64(field(cluster, &["certificate-authority-data"])?)?) {
            roots.add(c.context("CA certificate")?).context("add CA")?;
        }
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&b64(field(user, &["client-certificate-data"])?)?).collect::<Result<_, _>>().context("client certificate")?;
        let key = PrivateKeyDer::from_pem_slice(&b64(field(user, &["client-key-data"])?)?).context("client key")?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .context("client certificate")?;
        tls.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Target { base: server, host, addr, tls: Arc::new(tls) })
    }

    /// One HTTP/2 connection.
    async fn connect(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let tcp = tokio::net::TcpStream::connect(&self.addr).await.with_context(|| format!("connect {}", self.addr))?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from(self.host.clone()).context("server name")?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp).await.context("TLS handshake")?;
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.context("HTTP/2 handshake")?;
        tokio::spawn(conn);
        Ok(sender)
    }
}

/// Sends one request with a JSON body; returns the status code.
async fn send(sender: &mut SendRequest<Full<Bytes>>, base: &str, method: &http::Method, path: &str, body: Option<Vec<u8>>, timeout: Duration) -> anyhow::Result<u16> {
    send_as(sender, base, method, path, "application/json", body, timeout).await
}

/// Sends one request whose body is of `content_type`; returns the status
/// code.
async fn send_as(sender: &mut SendRequest<Full<Bytes>>, base: &str, method: &http::Method, path: &str, content_type: &str, body: Option<Vec<u8>>, timeout: Duration) -> anyhow::Result<u16> {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::USER_AGENT, "kubeload")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let fut = async {
        sender.ready().await?;
        let resp = sender.send_request(req).await?;
        let code = resp.status().as_u16();
        resp.into_body().collect().await?;
        anyhow::Ok(code)
    };
    tokio::time::timeout(timeout, fut).await.context("request timed out")?
}

/// One kind of object the workload writes.
#[derive(Clone, Copy)]
enum Kind {
    ConfigMap,
    Deployment,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmaps",
            Kind::Deployment => "deployments",
        }
    }

    fn collection(self, ns: &str) -> String {
        match self {
            Kind::ConfigMap => format!("/api/v1/namespaces/{ns}/configmaps"),
            Kind::Deployment => format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        }
    }

    /// Object `i`: a ConfigMap with 256 bytes of data, or a one-container
    /// Deployment.
    fn object(self, i: u64) -> Value {
        let name = format!("obj-{i}");
        match self {
            Kind::ConfigMap => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "kubeload"}}, "data": {"value": "v".repeat(256)}}),
            Kind::Deployment => json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": {"bench": "kubeload"}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}},
                },
            }),
        }
    }
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    Get,
    List,
    Apply,
}

/// The result of one phase.
struct Phase {
    name: String,
    ops: u64,
    errors: u64,
    elapsed: Duration,
    hist: Histogram<u64>,
}

impl Phase {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn ms(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }
}

async fn run_phase(cli: &Cli, target: &Arc<Target>, conns: &mut [SendRequest<Full<Bytes>>], ns: &str, kind: Kind, op: Op) -> anyhow::Result<Phase> {
    let total = match op {
        Op::Create => cli.objects,
        Op::Get => cli.gets.unwrap_or(cli.objects),
        Op::List => cli.lists,
        Op::Apply => cli.objects,
    };
    let next = Arc::new(AtomicU64::new(0));
    let timeout = Duration::from_secs(cli.timeout);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (c, sender) in conns.iter().enumerate() {
        let (mut sender, next, target, ns) = (sender.clone(), next.clone(), target.clone(), ns.to_string());
        let objects = cli.objects;
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
            let mut errors = 0u64;
            let mut seed = (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let coll = kind.collection(&ns);
                let mut content_type = "application/json";
                let (method, path, body) = match op {
                    Op::Create => (http::Method::POST, coll, Some(serde_json::to_vec(&kind.object(i))?)),
                    Op::Apply => {
                        // The object as created plus one label: one field
                        // changes, the rest is taken over from the creator.
                        let mut obj = kind.object(i);
                        obj["metadata"]["labels"]["applied"] = json!("kubeload");
                        content_type = "application/apply-patch+yaml";
                        (http::Method::PATCH, format!("{coll}/obj-{i}?fieldManager=kubeload&force=true"), Some(serde_json::to_vec(&obj)?))
                    }
                    Op::Get => {
                        // xorshift: a random object, not the one just written.
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        (http::Method::GET, format!("{coll}/obj-{}", seed % objects), None)
                    }
                    Op::List => (http::Method::GET, coll, None),
                };
                let t = Instant::now();
                let ok = matches!(send_as(&mut sender, &target.base, &method, &path, content_type, body, timeout).await, Ok(200..=299));
                hist.saturating_record(t.elapsed().as_micros().try_into().unwrap_or(u64::MAX).max(1));
                if !ok {
                    errors += 1;
                }
            }
            anyhow::Ok((hist, errors))
        }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    let mut errors = 0;
    for t in tasks {
        let (h, e) = t.await??;
        hist.add(h)?;
        errors += e;
    }
    let verb = match op {
        Op::Create => "create",
        Op::Get => "get",
        Op::List => "list",
        Op::Apply => "apply",
    };
    Ok(Phase { name: format!("{verb} {}", kind.plural()), ops: total, errors, elapsed: start.elapsed(), hist })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cli.clients == 0 || cli.objects == 0 {
        bail!("--clients and --objects must be at least 1");
    }
    let target = Arc::new(Target::from_kubeconfig(&cli.kubeconfig)?);
    let mut conns = Vec::with_capacity(cli.clients);
    for _ in 0..cli.clients {
        conns.push(target.connect().await?);
    }
    let timeout = Duration::from_secs(cli.timeout);
    let ns = format!("kubeload-{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());
    let body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))?;
    let code = send(&mut conns[0], &target.base, &http::Method::POST, "/api/v1/namespaces", Some(body), timeout).await?;
    if code != 201 {
        bail!("creating namespace {ns}: HTTP {code}");
    }

    let mut phases = Vec::new();
    for kind in [Kind::ConfigMap, Kind::Deployment] {
        let ops: &[Op] = if cli.apply { &[Op::Create, Op::Get, Op::List, Op::Apply] } else { &[Op::Create, Op::Get, Op::List] };
        for &op in ops {
            phases.push(run_phase(&cli, &target, &mut conns, &ns, kind, op).await?);
        }
    }
    let _ = send(&mut conns[0], &target.base, &http::Method::DELETE, &format!("/api/v1/namespaces/{ns}"), None, timeout).await;

    if !cli.json {
        println!("kubeload: {} objects per kind, {} clients, {} lists per kind", cli.objects, cli.clients, cli.lists);
        println!("{:<20} {:>7} {:>7} {:>10} {:>9} {:>9} {:>9}", "phase", "ops", "errors", "ops/s", "p50 ms", "p99 ms", "max ms");
    }
    for p in &phases {
        if cli.json {
            let line = json!({"phase": p.name, "ops": p.ops, "errors": p.errors, "ops_per_sec": p.ops_per_sec(), "p50_ms": p.ms(0.5), "p99_ms": p.ms(0.99), "max_ms": p.hist.max() as f64 / 1000.0, "clients": cli.clients});
            println!("{line}");
        } else {
            println!("{:<20} {:>7} {:>7} {:>10.1} {:>9.2} {:>9.2} {:>9.2}", p.name, p.ops, p.errors, p.ops_per_sec(), p.ms(0.5), p.ms(0.99), p.hist.max() as f64 / 1000.0);
        }
    }
    let errors: u64 = phases.iter().map(|p| p.errors).sum();
    if errors > 0 {
        bail!("{errors} requests failed");
    }
    Ok(())
}
