//! Auto compaction (etcd `--auto-compaction-mode` / `--auto-compaction-retention`).
//!
//! - `periodic`: keep `retention` of history. Every `retention / 10` (at most
//!   one hour) the leader samples the current revision; it compacts to the
//!   revision sampled `retention` ago.
//! - `revision`: keep the last `retention` revisions, checked every 5 minutes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use proto::etcdserverpb::CompactionRequest;

use crate::command::Command;
use crate::server::Ctx;

/// An auto-compaction policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoCompaction {
    /// Keep this much history.
    Periodic(Duration),
    /// Keep this many revisions.
    Revision(i64),
}

impl AutoCompaction {
    /// Parses etcd's flag pair. `retention` is a duration (`1h`, `30m`) or,
    /// in periodic mode, a bare number of hours; in revision mode a count.
    /// A zero retention disables auto compaction (`None`).
    ///
    /// # Errors
    /// A message for an unknown mode or an unparsable retention.
    pub fn parse(mode: &str, retention: &str) -> Result<Option<Self>, String> {
        match mode {
            "periodic" => {
                let d = match retention.parse::<u64>() {
                    Ok(h) => Duration::from_secs(h * 3600),
                    Err(_) => humantime::parse_duration(retention).map_err(|e| format!("invalid --auto-compaction-retention {retention:?}: {e}"))?,
                };
                Ok((!d.is_zero()).then_some(AutoCompaction::Periodic(d)))
            }
            "revision" => {
                let n = retention.parse::<i64>().map_err(|e| format!("invalid --auto-compaction-retention {retention:?}: {e}"))?;
                Ok((n > 0).then_some(AutoCompaction::Revision(n)))
            }
            other => Err(format!("unknown --auto-compaction-mode {other:?} (want periodic or revision)")),
        }
    }
}

async fn compact(ctx: &Ctx, rev: i64) {
    if rev <= ctx.store.compact_revision() || rev <= 0 {
        return;
    }
    match ctx.node.propose(Command::Compact(CompactionRequest { revision: rev, physical: false })).await {
        Ok(_) => tracing::info!(revision = rev, "auto compaction"),
        Err(e) => tracing::warn!(revision = rev, "auto compaction failed: {e}"),
    }
}

/// Runs the policy forever on the leader.
pub async fn run(ctx: Ctx, policy: AutoCompaction) {
    match policy {
        AutoCompaction::Periodic(retention) => {
            let step = (retention / 10).min(Duration::from_secs(3600)).max(Duration::from_millis(100));
            let mut samples: VecDeque<(Instant, i64)> = VecDeque::new();
            loop {
                tokio::time::sleep(step).await;
                let now = Instant::now();
                samples.push_back((now, ctx.store.current_revision()));
                let mut target = None;
                while let Some((t, rev)) = samples.front().copied() {
                    if now.duration_since(t) >= retention {
                        target = Some(rev);
                        samples.pop_front();
                    } else {
                        break;
                    }
                }
                if let (Some(rev), true) = (target, ctx.node.is_leader()) {
                    compact(&ctx, rev).await;
                }
            }
        }
        AutoCompaction::Revision(keep) => loop {
            tokio::time::sleep(Duration::from_secs(300)).await;
            if ctx.node.is_leader() {
                compact(&ctx, ctx.store.current_revision() - keep).await;
            }
        },
    }
}
