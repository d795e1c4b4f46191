//! The faults, composed from the primitives kill, restart, pause, resume
//! and the proxy's per-link cut and delay (in the manner of a Jepsen
//! nemesis). Each [`Fault::inject`] starts the fault, holds it, and heals it.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cluster::{connect, Cluster};
use crate::proxy::{link, Faults};

/// One fault type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No fault: a baseline.
    None,
    /// SIGKILL the leader, restart it after the hold time.
    KillLeader,
    /// SIGKILL a follower, restart it after the hold time.
    KillFollower,
    /// SIGSTOP the leader, SIGCONT after the hold time.
    PauseLeader,
    /// SIGSTOP a follower, SIGCONT after the hold time.
    PauseFollower,
    /// Cut the leader from both others (leader in the minority).
    PartitionLeader,
    /// Cut one follower from both others.
    PartitionFollower,
    /// Delay every peer link by 100 ms each way.
    Delay,
    /// Drop peer traffic intermittently: random members' links are cut and
    /// healed every 300 ms.
    Drop,
    /// Kill a follower, write enough that its peers snapshot and purge
    /// their Raft log past it, then restart it: it must install a snapshot.
    SnapshotRestart,
}

impl Fault {
    /// Every fault, in the order the short mode runs them.
    pub const ALL: [Fault; 10] = [
        Fault::None,
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::PauseLeader,
        Fault::PauseFollower,
        Fault::PartitionLeader,
        Fault::PartitionFollower,
        Fault::Delay,
        Fault::Drop,
        Fault::SnapshotRestart,
    ];

    /// The kebab-case name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::KillLeader => "kill-leader",
            Fault::KillFollower => "kill-follower",
            Fault::PauseLeader => "pause-leader",
            Fault::PauseFollower => "pause-follower",
            Fault::PartitionLeader => "partition-leader",
            Fault::PartitionFollower => "partition-follower",
            Fault::Delay => "delay",
            Fault::Drop => "drop",
            Fault::SnapshotRestart => "snapshot-restart",
        }
    }

    /// Injects the fault on `c`, holds it for `hold`, and heals it. Returns
    /// a short description of what was done.
    ///
    /// # Errors
    /// If no leader is known or a process cannot be signalled or started.
    pub async fn inject(self, c: &mut Cluster, hold: Duration, seed: u64) -> Result<String> {
        let n = c.members.len();
        let leader = match self {
            Fault::None | Fault::Delay | Fault::Drop => 0,
            _ => match c.leader().await {
                Some(l) => l,
                None => bail!("no leader before injecting {self}"),
            },
        };
        let follower = (leader + 1) % n;
        Ok(match self {
            Fault::None => {
                tokio::time::sleep(hold).await;
                "nothing".into()
            }
            Fault::KillLeader | Fault::KillFollower => {
                let i = if self == Fault::KillLeader { leader } else { follower };
                c.kill(i);
                tokio::time::sleep(hold).await;
                c.restart(i)?;
                format!("killed and restarted m{i}")
            }
            Fault::PauseLeader | Fault::PauseFollower => {
                let i = if self == Fault::PauseLeader { leader } else { follower };
                c.pause(i)?;
                tokio::time::sleep(hold).await;
                c.resume(i)?;
                format!("paused and resumed m{i}")
            }
            Fault::PartitionLeader | Fault::PartitionFollower => {
                let i = if self == Fault::PartitionLeader { leader } else { follower };
                let mut f = Faults::default();
                f.isolate(&[i], n);
                c.proxy.set(f);
                tokio::time::sleep(hold).await;
                c.proxy.heal();
                format!("isolated m{i}, then healed")
            }
            Fault::Delay => {
                let mut f = Faults::default();
                for a in 0..n {
                    for b in a + 1..n {
                        f.delay.insert(link(a, b), Duration::from_millis(100));
                    }
                }
                c.proxy.set(f);
                tokio::time::sleep(hold).await;
                c.proxy.heal();
                "delayed all peer links by 100ms".into()
            }
            Fault::Drop => {
                let mut rng = SmallRng::seed_from_u64(seed);
                let end = Instant::now() + hold;
                let mut flaps = 0;
                while Instant::now() < end {
                    let mut f = Faults::default();
                    if rng.random_bool(0.5) {
                        f.isolate(&[rng.random_range(0..n)], n);
                    }
                    c.proxy.set(f);
                    flaps += 1;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                c.proxy.heal();
                format!("{flaps} drop/pass flaps")
            }
            Fault::SnapshotRestart => {
                c.kill(follower);
                let killed_at = raft_index(c, (follower + 1) % c.members.len()).await;
                // Five snapshots' worth past what is kept: snapshots are
                // built off the Raft thread, and on a loaded machine the
                // latest may still be in progress at the restart.
                let kept = c.opts.target.entries_kept_after_snapshot();
                let writes = kept + 5 * c.opts.snapshot_count + 100;
                let wrote = fill(c, follower, writes).await?;
                // Give the peers time to snapshot and purge: raftstore's
                // until each has purged its log past the killed member's
                // (a loaded machine builds snapshots late), with a margin:
                // the killed member may hold a few entries that the member
                // asked had not yet appended.
                if let Some(at) = killed_at {
                    wait_for_purge(c, follower, at + 100).await;
                }
                tokio::time::sleep(hold).await;
                c.restart(follower)?;
                let how = caught_up_by_snapshot(c, follower).await;
                format!("killed m{follower}, wrote {wrote} entries past it, restarted it; {how}")
            }
        })
    }
}

/// Waits (up to 20 s) until `i` has applied the cluster's current
/// revision, then says whether it installed a snapshot: raftstore counts
/// received snapshots in `etcd_network_snapshot_receive_success` on
/// `/metrics`; etcd 3.4 counts them only on its peer side, so for etcd this
/// only reports the catch-up.
async fn caught_up_by_snapshot(c: &Cluster, i: usize) -> String {
    let other = (i + 1) % c.members.len();
    let deadline = Instant::now() + Duration::from_secs(20);
    let target = match connect(&c.endpoint(other), Duration::from_secs(2)).await {
        Ok(mut cl) => cl.get("health", None).await.ok().and_then(|r| r.header().map(|h| h.revision())).unwrap_or(0),
        Err(_) => 0,
    };
    let mut applied = 0;
    while Instant::now() < deadline {
        if let Ok(mut cl) = connect(&c.endpoint(i), Duration::from_secs(1)).await {
            applied = cl.get("health", Some(etcd_client::GetOptions::new().with_serializable())).await.ok().and_then(|r| r.header().map(|h| h.revision())).unwrap_or(0);
            if applied >= target {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caught = if applied >= target { format!("caught up to revision {target}") } else { format!("only at revision {applied} of {target} after 20s") };
    // The restarted process's own counter of snapshots received (etcd's
    // metric name). Its `snapshots/installed-*` directory is no proof
    // either way: the member prunes it as soon as it builds a snapshot of
    // its own, which the ongoing workload brings within a second.
    let installed = metric_sum(&c.endpoint(i), "etcd_network_snapshot_receive_success").await.unwrap_or(0.0) > 0.0;
    match c.opts.target {
        crate::cluster::Target::Raftstore(_) if installed => {
            format!("{caught} by installing a snapshot")
        }
        crate::cluster::Target::Raftstore(_) => {
            format!("{caught} WITHOUT a snapshot (log not purged far enough)")
        }
        crate::cluster::Target::Etcd(_) => caught,
    }
}

/// Writes `count` puts outside the workload prefix through members other
/// than `skip`, 16 at a time. Returns how many succeeded.
/// Member `i`'s Raft log index (etcd Status `raft_index`), if it answers.
async fn raft_index(c: &Cluster, i: usize) -> Option<u64> {
    let mut cl = connect(&c.endpoint(i), Duration::from_secs(2)).await.ok()?;
    cl.status().await.ok().map(|s| s.raft_index())
}

/// Waits (up to 30 s) until every raftstore member but `skip` has purged
/// its Raft log through `index` (`raftstore_raft_log_purged_index` on
/// `/metrics`), writing a few entries every 50 ms meanwhile. A snapshot
/// alone is not enough: openraft postpones the purge while the leader's
/// replication to the killed member holds a range below it in flight, and
/// tries again only on its next snapshot or progress event, which the
/// writes bring. Returns at once for etcd.
async fn wait_for_purge(c: &Cluster, skip: usize, index: u64) {
    if !matches!(c.opts.target, crate::cluster::Target::Raftstore(_)) {
        return;
    }
    let live: Vec<usize> = (0..c.members.len()).filter(|&i| i != skip).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut writer = None;
    let mut n = 0u64;
    while Instant::now() < deadline {
        let mut all = true;
        for &i in &live {
            all &= purged_index(&c.endpoint(i)).await.unwrap_or(0) >= index;
        }
        if all {
            return;
        }
        if writer.is_none() {
            writer = connect(&c.endpoint(live[0]), Duration::from_secs(2)).await.ok();
        }
        if let Some(cl) = writer.as_mut() {
            for _ in 0..20 {
                let _ = tokio::time::timeout(Duration::from_secs(2), cl.put(format!("/chaos-fill/{}", n % 50), format!("p{n}"), None)).await;
                n += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `raftstore_raft_log_purged_index` from the member's `/metrics`.
async fn purged_index(endpoint: &str) -> Option<u64> {
    metric_sum(endpoint, "raftstore_raft_log_purged_index").await.map(|v| v as u64)
}

/// The sum over all label sets of metric `name` on the member's
/// `/metrics` (Prometheus text), if the member answers.
async fn metric_sum(endpoint: &str, name: &str) -> Option<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(endpoint).await.ok()?;
        let req = format!("GET /metrics HTTP/1.1\r\nHost: {endpoint}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        let values = body.lines().filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            if !(rest.starts_with(' ') || rest.starts_with('{')) {
                return None;
            }
            rest.rsplit(' ').next()?.trim().parse::<f64>().ok()
        });
        Some(values.sum())
    };
    tokio::time::timeout(Duration::from_secs(2), fetch).await.ok().flatten()
}

async fn fill(c: &Cluster, skip: usize, count: u64) -> Result<u64> {
    let eps: Vec<String> = (0..c.members.len()).filter(|&i| i != skip).map(|i| c.endpoint(i)).collect();
    let mut tasks = Vec::new();
    for t in 0..16u64 {
        let ep = eps[t as usize % eps.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            let Ok(mut cl) = connect(&ep, Duration::from_secs(2)).await else {
                return 0;
            };
            let mut i = t;
            while i < count {
                if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), cl.put(format!("/chaos-fill/{}", i % 50), format!("f{i}"), None)).await {
                    ok += 1;
                }
                i += 16;
            }
            ok
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap_or(0);
    }
    Ok(total)
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Fault::ALL.iter().copied().find(|f| f.name() == s).ok_or_else(|| format!("unknown fault {s:?}; one of: {}", Fault::ALL.map(|f| f.name()).join(", ")))
    }
}
