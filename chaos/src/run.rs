//! One phase per fault: start a fresh cluster, run the workload, inject the
//! fault, heal, read every member's final view, check, report.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use etcd_client::{GetOptions, WatchOptions};

use crate::check::{check_all, Violation};
use crate::cluster::{connect, Cluster, Options, Target};
use crate::fault::Fault;
use crate::history::*;
use crate::workload::{self, Recorder};

/// How long watchers get to deliver the final revision once it is known.
pub const WATCH_CATCH_UP: Duration = Duration::from_secs(20);

/// Timing and size of one phase.
#[derive(Clone, Debug)]
pub struct PhaseConfig {
    /// Load before the fault.
    pub warmup: Duration,
    /// How long the fault is held.
    pub hold: Duration,
    /// Load after healing, before the final check.
    pub recover: Duration,
    /// Concurrent KV workers (spread over the members).
    pub clients: usize,
    /// Concurrent watchers.
    pub watchers: usize,
    /// Size of the key set.
    pub keys: usize,
    /// Seed for the workload's choices.
    pub seed: u64,
    /// Save every history, not only failing ones.
    pub save_all: bool,
    /// Watchers send RequestProgress every 300 ms. `None`: on for
    /// raftstore, off for etcd, because Debian's etcd 3.4.23 predates the
    /// fix for etcd-io/etcd#15220 (a requested progress notification can
    /// run ahead of events not yet sent to a catching-up watcher) and the
    /// watch checker reports exactly that.
    pub request_progress: Option<bool>,
}

impl PhaseConfig {
    /// `--mode short`: about 10 s per fault (15-20 s for snapshot-restart).
    pub fn short() -> Self {
        PhaseConfig {
            warmup: Duration::from_secs(1),
            hold: Duration::from_secs(3),
            recover: Duration::from_secs(2),
            clients: 6,
            watchers: 3,
            keys: 10,
            seed: 1,
            save_all: false,
            request_progress: None,
        }
    }

    /// `--mode long`: about 50 s per fault.
    pub fn long() -> Self {
        PhaseConfig {
            warmup: Duration::from_secs(10),
            hold: Duration::from_secs(20),
            recover: Duration::from_secs(10),
            clients: 12,
            watchers: 4,
            keys: 10,
            seed: 1,
            save_all: false,
            request_progress: None,
        }
    }
}

/// Result of one phase.
#[derive(Debug)]
pub struct PhaseReport {
    /// The fault.
    pub fault: Fault,
    /// What the fault did.
    pub action: String,
    /// Operation counts: `ok`, `failed`, `unknown` per request kind.
    pub counts: BTreeMap<String, [usize; 3]>,
    /// The most frequent error messages with their counts.
    pub top_errors: Vec<(String, usize)>,
    /// Watch sessions and events delivered.
    pub watch_sessions: usize,
    /// Events delivered over all watchers.
    pub watch_events: usize,
    /// The final revision.
    pub final_revision: i64,
    /// Violations found.
    pub violations: Vec<Violation>,
    /// Where the history was saved (when there were violations).
    pub saved: Option<PathBuf>,
    /// Wall time.
    pub elapsed: Duration,
    /// Peer connections the proxy attributed to their opening member, and
    /// those it could not.
    pub proxy_connections: (u64, u64),
}

impl fmt::Display for PhaseReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ok, failed, unknown) = self.counts.values().fold((0, 0, 0), |a, c| (a.0 + c[0], a.1 + c[1], a.2 + c[2]));
        writeln!(
            f,
            "{:<20} {:>6} ops ({ok} ok, {failed} failed, {unknown} unknown), {} watch events in {} sessions, final revision {}, {} violations, {:.1}s — {}",
            self.fault.name(),
            ok + failed + unknown,
            self.watch_events,
            self.watch_sessions,
            self.final_revision,
            self.violations.len(),
            self.elapsed.as_secs_f64(),
            self.action
        )?;
        let per_kind: Vec<String> = self.counts.iter().map(|(k, c)| format!("{k} {}/{}/{}", c[0], c[1], c[2])).collect();
        writeln!(f, "    ok/failed/unknown: {}; peer connections attributed/unattributed: {}/{}", per_kind.join(", "), self.proxy_connections.0, self.proxy_connections.1)?;
        for (e, k) in &self.top_errors {
            writeln!(f, "    {k:>5} x {e}")?;
        }
        for v in self.violations.iter().take(20) {
            writeln!(f, "    VIOLATION {v}")?;
        }
        if let Some(p) = &self.saved {
            writeln!(f, "    history saved to {} (replay: chaos check --history {})", p.display(), p.display())?;
        }
        Ok(())
    }
}

fn kind_name(r: &Request) -> &'static str {
    match r {
        Request::Put { lease: 0, .. } => "put",
        Request::Put { .. } => "put-lease",
        Request::Get { .. } => "get",
        Request::Cas { .. } => "txn-cas",
        Request::Delete { .. } => "delete",
        Request::LeaseGrant { .. } => "lease-grant",
        Request::LeaseRevoke { .. } => "lease-revoke",
    }
}

/// Runs one fault phase against a fresh cluster in a temporary directory,
/// saving the history to `out` if a checker fails.
///
/// # Errors
/// If the cluster cannot start or heal (a violation is not an error; it is
/// in the report).
pub async fn run_phase(target: &Target, fault: Fault, cfg: &PhaseConfig, out: &Path) -> Result<PhaseReport> {
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix(&format!("chaos-{}-{}-", target.name(), fault.name())).tempdir()?;
    let mut cluster = match Cluster::start(Options::new(target.clone(), dir.path())).await {
        Ok(c) => c,
        Err(e) => {
            // Keep the member logs to see why.
            std::fs::create_dir_all(out)?;
            for i in 0..3 {
                let _ = std::fs::copy(dir.path().join(format!("m{i}.log")), out.join(format!("{}-{}-m{i}.start.log", target.name(), fault.name())));
            }
            return Err(e).with_context(|| format!("starting {} for {fault} (member logs in {})", target.name(), out.display()));
        }
    };
    let rec = Recorder::new("/chaos/k/", cfg.keys);
    let request_progress = cfg.request_progress.unwrap_or(matches!(target, Target::Raftstore(_)));
    let n = cluster.members.len();
    let endpoints: Vec<String> = (0..n).map(|i| cluster.endpoint(i)).collect();
    let workers: Vec<_> = (0..cfg.clients).map(|id| tokio::spawn(workload::worker(rec.clone(), id, id % n, endpoints[id % n].clone(), cfg.seed * 1000 + id as u64))).collect();
    let watchers: Vec<_> = (0..cfg.watchers).map(|id| tokio::spawn(workload::watcher(rec.clone(), id, id % n, endpoints.clone(), request_progress))).collect();
    tokio::time::sleep(cfg.warmup).await;
    let action = match fault.inject(&mut cluster, cfg.hold, cfg.seed).await {
        Ok(a) => a,
        Err(e) => format!("fault not injected: {e:#}"),
    };
    tokio::time::sleep(cfg.recover).await;
    rec.stop_workers();
    for w in workers {
        let _ = w.await;
    }
    let mut h = History { target: target.name().into(), fault: fault.name().into(), prefix: rec.prefix.clone(), ..Default::default() };
    let fin = finish(&cluster, &rec).await;
    // Watchers stop once they reach the final revision; a watcher still
    // behind after WATCH_CATCH_UP is stopped and reported by the checker.
    let stopper = {
        let rec = rec.clone();
        let wait = if fin.is_ok() { WATCH_CATCH_UP } else { Duration::ZERO };
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            rec.give_up();
        })
    };
    for w in watchers {
        if let Ok(w) = w.await {
            h.watchers.push(w);
        }
    }
    stopper.abort();
    h.operations = rec.operations();
    let mut violations = Vec::new();
    match fin {
        Ok((rev, members)) => {
            h.final_revision = rev;
            h.members = members;
            violations.extend(check_all(&h));
        }
        Err(e) => violations.push(Violation { checker: "durability".into(), message: format!("cluster did not heal: {e:#}") }),
    }
    let mut counts: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for op in &h.operations {
        let c = counts.entry(kind_name(&op.request).into()).or_default();
        match op.outcome {
            Outcome::Ok { .. } => c[0] += 1,
            Outcome::Failed { .. } => c[1] += 1,
            Outcome::Unknown { .. } => c[2] += 1,
        }
    }
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for op in &h.operations {
        if let Outcome::Failed { error } | Outcome::Unknown { error } = &op.outcome {
            *errors.entry(error.chars().take(110).collect()).or_default() += 1;
        }
    }
    let mut top_errors: Vec<(String, usize)> = errors.into_iter().collect();
    top_errors.sort_by_key(|e| std::cmp::Reverse(e.1));
    top_errors.truncate(3);
    let saved = if violations.is_empty() && !cfg.save_all {
        None
    } else {
        std::fs::create_dir_all(out)?;
        let p = out.join(format!("{}-{}.json", target.name(), fault.name()));
        std::fs::write(&p, serde_json::to_vec(&h)?)?;
        // Keep the member logs next to the history.
        for m in &cluster.members {
            let _ = std::fs::copy(dir.path().join(format!("{}.log", m.name)), out.join(format!("{}-{}-{}.log", target.name(), fault.name(), m.name)));
        }
        Some(p)
    };
    Ok(PhaseReport {
        fault,
        action,
        counts,
        top_errors,
        watch_sessions: h.watchers.iter().map(|w| w.sessions.len()).sum(),
        watch_events: h.watchers.iter().flat_map(|w| &w.sessions).flat_map(|s| &s.responses).map(|r| r.events.len()).sum(),
        final_revision: h.final_revision,
        violations,
        saved,
        elapsed: started.elapsed(),
        proxy_connections: cluster.proxy.stats(),
    })
}

/// After the workload: wait for health, write the sentinel (its revision is
/// the final revision), let watchers catch up, and read every member's
/// final range, HashKV and event stream at that revision.
async fn finish(c: &Cluster, rec: &Arc<Recorder>) -> Result<(i64, Vec<MemberFinal>)> {
    c.wait_healthy(Duration::from_secs(30)).await?;
    let sentinel = format!("{}~end", rec.prefix);
    let deadline = Instant::now() + Duration::from_secs(20);
    let rev = loop {
        let call_ns = rec.now();
        let req = Request::Put { key: sentinel.clone(), value: "sentinel".into(), lease: 0 };
        let res = async {
            let mut cl = connect(&c.endpoint(0), workload::OP_TIMEOUT).await?;
            Ok::<_, anyhow::Error>(tokio::time::timeout(workload::OP_TIMEOUT, workload::execute(&mut cl, &req)).await??)
        }
        .await;
        let outcome = match &res {
            Ok(r) => Outcome::Ok { response: r.clone() },
            Err(e) => Outcome::Unknown { error: format!("{e:#}") },
        };
        rec.record(Operation { client: usize::MAX, member: 0, call_ns, return_ns: rec.now(), request: req, outcome });
        if let Ok(r) = res {
            break r.revision();
        }
        if Instant::now() > deadline {
            bail!("the sentinel write did not succeed within 20s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    rec.set_final_revision(rev);
    let mut members = Vec::new();
    for i in 0..c.members.len() {
        members.push(member_final(c, i, rev, &rec.prefix).await.with_context(|| format!("final view of m{i}"))?);
    }
    Ok((rev, members))
}

async fn member_final(c: &Cluster, i: usize, rev: i64, prefix: &str) -> Result<MemberFinal> {
    let mut cl = connect(&c.endpoint(i), Duration::from_secs(5)).await?;
    // Wait until the member applied `rev` (serializable reads are local).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = cl.get("health", Some(GetOptions::new().with_serializable())).await;
        if r.as_ref().ok().and_then(|r| r.header()).is_some_and(|h| h.revision() >= rev) {
            break;
        }
        if Instant::now() > deadline {
            bail!("m{i} did not apply revision {rev} within 20s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let range = cl.get(prefix, Some(GetOptions::new().with_prefix().with_revision(rev).with_serializable())).await?;
    let kvs = range.kvs().iter().map(workload::to_kv).collect();
    let hash_kv = cl.maintenance_client().hash_kv(rev).await?.hash();
    let mut events = Vec::new();
    let mut stream = cl.watch(prefix, Some(WatchOptions::new().with_prefix().with_start_revision(1).with_prev_key())).await?;
    while events.last().is_none_or(|e: &Event| e.kv.mod_revision < rev) {
        let msg = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.context("reading the event stream timed out")??;
        let Some(resp) = msg else { bail!("event stream ended before revision {rev}") };
        if resp.canceled() {
            bail!("event stream canceled: {}", resp.cancel_reason());
        }
        events.extend(resp.events().iter().filter_map(workload::to_event));
    }
    events.retain(|e| e.kv.mod_revision <= rev);
    Ok(MemberFinal { member: i, kvs, hash_kv, events })
}

/// Runs `faults` in order and prints each report; returns all reports.
///
/// # Errors
/// If a phase cannot run at all.
pub async fn run_all(target: &Target, faults: &[Fault], cfg: &PhaseConfig, rounds: usize, out: &Path) -> Result<Vec<PhaseReport>> {
    let mut reports = Vec::new();
    for round in 0..rounds {
        for (k, &fault) in faults.iter().enumerate() {
            let mut cfg = cfg.clone();
            cfg.seed = cfg.seed.wrapping_add((round * faults.len() + k) as u64);
            let r = run_phase(target, fault, &cfg, out).await?;
            print!("{r}");
            reports.push(r);
        }
    }
    Ok(reports)
}
