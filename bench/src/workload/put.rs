//! `put`: closed-loop Puts of random keys.

use std::sync::Arc;
use std::time::Instant;

use rand::{rngs::SmallRng, SeedableRng};

use crate::cli::{secs, CommonArgs};
use crate::conn::connect_pool;
use crate::driver::{run_closed_loop, Outcome};
use crate::error::Result;
use crate::keys::{random_value, KeySpace};
use crate::report::Report;
use crate::stats::Tickets;

/// Runs the `put` workload: `--clients` clients over `--conns` connections,
/// each putting a random key of `<prefix>put/` with a `--val-size` value.
///
/// # Errors
/// Unreachable endpoints; request failures are counted, not returned.
pub async fn run(args: &CommonArgs, endpoints: &[String]) -> Result<Report> {
    let conns = args.conns_for(args.clients);
    let pool = connect_pool(endpoints, conns, secs(args.connect_timeout)).await?;
    let keys = KeySpace::new(format!("{}put/", args.prefix), args.key_size, args.key_space);
    let tickets = Arc::new(Tickets::new(args.op_limit(), Instant::now() + args.time_limit()));
    let val_size = args.val_size;
    let run = run_closed_loop(args.clients, tickets, args.request_timeout(), |i| {
        let kv = pool[i % pool.len()].kv_client();
        let keys = keys.clone();
        let mut rng = SmallRng::from_rng(&mut rand::rng());
        let value = random_value(val_size, &mut rng);
        move || {
            let key = keys.random(&mut rng);
            let value = value.clone();
            let mut kv = kv.clone();
            async move {
                kv.put(key, value, None).await?;
                Ok(Outcome::default())
            }
        }
    })
    .await;
    Ok(Report::new("put", endpoints, args.clients, conns, &run.stats, run.elapsed))
}
