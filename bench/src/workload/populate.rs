//! Untimed pre-population of a key space, 100 puts per Txn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Txn, TxnOp};
use rand::{rngs::SmallRng, SeedableRng};
use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::keys::{random_value, KeySpace};

/// Puts per Txn; etcd's default limit is 128 operations per Txn.
pub const BATCH: u64 = 100;

/// Writes every key of `keys` with a random `val_size`-byte value, using
/// one worker per connection in `pool`.
///
/// # Errors
/// [`Error::Setup`] on the first failed or timed-out Txn.
pub async fn populate(pool: &[Client], keys: &KeySpace, val_size: usize, request_timeout: Duration) -> Result<()> {
    let batches = keys.len().div_ceil(BATCH);
    let next = Arc::new(AtomicU64::new(0));
    let workers = u64::try_from(pool.len()).unwrap_or(1).clamp(1, batches);
    let mut set = JoinSet::new();
    for (w, client) in (0..workers).zip(pool.iter().cycle()) {
        let mut kv = client.kv_client();
        let keys = keys.clone();
        let next = Arc::clone(&next);
        set.spawn(async move {
            let mut rng = SmallRng::seed_from_u64(w);
            let value = random_value(val_size, &mut rng);
            // Bounded by the batch count; each Txn by the request timeout.
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= batches {
                    return Ok(());
                }
                let ops: Vec<TxnOp> = (b * BATCH..((b + 1) * BATCH).min(keys.len())).map(|i| TxnOp::put(keys.key(i), value.clone(), None)).collect();
                match tokio::time::timeout(request_timeout, kv.txn(Txn::new().and_then(ops))).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(Error::Setup(format!("populating keys: {e}"))),
                    Err(_) => return Err(Error::Setup(format!("populating keys: Txn timed out after {:.1} s", request_timeout.as_secs_f64()))),
                }
            }
        });
    }
    while let Some(res) = set.join_next().await {
        match res {
            Ok(r) => r?,
            Err(e) => return Err(Error::Setup(format!("populate worker failed: {e}"))),
        }
    }
    Ok(())
}
