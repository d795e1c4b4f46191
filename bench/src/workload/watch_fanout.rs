//! `watch-fanout`: W watchers on one prefix, one writer putting at a rate.
//!
//! - The watchers are spread over `--conns` connections (default
//!   min(watchers, 16)), each on its own watch stream, all on the prefix
//!   `<prefix>watch/<run id>/` so other runs cannot interfere. The writer
//!   has a connection of its own.
//! - The writer issues Puts at `--rate` per second (paced by schedule, at
//!   most `--writer-inflight` at once). Each value starts with the send
//!   time, in nanoseconds since an [`Instant`] shared by the whole process.
//! - Every watcher records, per event, receive time minus send time.
//! - After the last Put, watchers keep reading until each has one event per
//!   acknowledged Put, or `--drain` seconds pass.
//!
//! `ops` is the number of events delivered over all watchers, `seconds`
//! runs from the first Put to the last delivered event, and the latencies
//! are delivery latencies. `errors` adds failed Puts, failed watch streams
//! and missing events.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, KvClient, WatchOptions, WatchStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::cli::{secs, CommonArgs, WatchArgs};
use crate::conn::connect_pool;
use crate::driver::join_stats;
use crate::error::{Error, Result};
use crate::keys::{decode_ts_value, encode_ts_value, nanos_since, KeySpace};
use crate::report::{per_sec, Report};
use crate::stats::{Stats, Tickets};

/// Where watchers stop, sent once the writer is done.
#[derive(Debug, Clone, Copy)]
struct Stop {
    /// Events each watcher should see: the acknowledged Puts.
    expected: u64,
    /// Give up waiting for missing events at this time.
    drain_deadline: Instant,
}

/// What one watcher saw.
#[derive(Debug)]
struct WatcherResult {
    /// `ops` = events delivered; latencies are delivery latencies.
    stats: Stats,
    /// When the last event arrived.
    last_event: Option<Instant>,
}

/// Runs the `watch-fanout` workload. `--clients` is not used; the watcher
/// count is `--watchers`.
///
/// # Errors
/// Bad flags, unreachable endpoints, or a watch that cannot be created.
pub async fn run(args: &CommonArgs, w: &WatchArgs, endpoints: &[String]) -> Result<Report> {
    if w.watchers == 0 || w.writer_inflight == 0 {
        return Err(Error::InvalidArgs("--watchers and --writer-inflight must be at least 1".into()));
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !(positive(w.rate) && positive(w.drain)) {
        return Err(Error::InvalidArgs("--rate and --drain must be positive numbers".into()));
    }
    let connect_timeout = secs(args.connect_timeout);
    let request_timeout = args.request_timeout();
    let conns = args.conns_for(w.watchers);
    let pool = connect_pool(endpoints, conns, connect_timeout).await?;
    let writer_conn = connect_pool(endpoints, 1, connect_timeout).await?;

    let epoch = Instant::now();
    let run_id = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let keys = KeySpace::new(format!("{}watch/{run_id}/", args.prefix), args.key_size, args.key_space);

    let time_limit = args.time_limit();
    // Puts the writer can issue: bounded by --total and by rate * time.
    let by_rate = (w.rate * time_limit.as_secs_f64()).ceil();
    let max_puts = if by_rate < 1e15 { args.op_limit().min(by_rate as u64 + 1) } else { args.op_limit() };
    let drain = secs(w.drain);
    // Latest moment any watcher may still run, counted from now: creating
    // watchers, writing, the writer's last requests, and the drain.
    let hard_deadline = Instant::now() + connect_timeout + time_limit + request_timeout + drain + Duration::from_secs(5);
    let max_messages = max_puts.saturating_mul(2).saturating_add(1000);

    let (stop_tx, stop_rx) = watch::channel(None::<Stop>);
    let mut watchers = JoinSet::new();
    for i in 0..w.watchers {
        let mut client = pool[i % pool.len()].clone();
        let stream = create_watch(&mut client, keys.prefix(), connect_timeout).await?;
        watchers.spawn(watch_loop(stream, stop_rx.clone(), epoch, hard_deadline, max_messages));
    }

    let writer_start = Instant::now();
    let tickets = Tickets::new(max_puts, writer_start + time_limit);
    let mut kv = writer_conn.first().map(Client::kv_client).ok_or_else(|| Error::Setup("no writer connection".into()))?;
    let writer = write_paced(&mut kv, &keys, &tickets, w.rate, w.writer_inflight, args.val_size, epoch, request_timeout).await;
    let writer_end = Instant::now();

    // A closed channel only means every watcher already ended.
    let _ = stop_tx.send(Some(Stop { expected: writer.ops, drain_deadline: Instant::now() + drain }));

    let mut delivered = Stats::new();
    let mut missing = 0u64;
    let mut last_event = writer_end;
    let mut finished = 0usize;
    loop {
        match tokio::time::timeout_at(hard_deadline.into(), watchers.join_next()).await {
            Ok(Some(Ok(r))) => {
                finished += 1;
                missing += writer.ops.saturating_sub(r.stats.ops);
                delivered.merge(&r.stats);
                if let Some(t) = r.last_event {
                    last_event = last_event.max(t);
                }
            }
            Ok(Some(Err(e))) => delivered.record_err(format!("watcher task failed: {e}")),
            Ok(None) => break,
            Err(_) => {
                watchers.abort_all();
                break;
            }
        }
    }
    // Watchers that failed or were aborted delivered nothing we counted.
    let unfinished = u64::try_from(w.watchers.saturating_sub(finished)).unwrap_or(u64::MAX);
    missing = missing.saturating_add(unfinished.saturating_mul(writer.ops));

    let seconds = last_event.saturating_duration_since(writer_start);
    let mut report = Report::new("watch-fanout", endpoints, w.watchers, conns, &delivered, seconds);
    report.errors = delivered.errors.saturating_add(writer.errors).saturating_add(missing);
    report.first_error = writer.first_error.clone().or(delivered.first_error.clone()).or_else(|| (missing > 0).then(|| format!("{missing} events not delivered")));
    report.puts = Some(writer.ops);
    report.puts_per_sec = Some(per_sec(writer.ops, writer_end.saturating_duration_since(writer_start).as_secs_f64()));
    report.missing_events = Some(missing);
    Ok(report)
}

/// Opens a watch stream on `prefix` and waits for its `created` response.
async fn create_watch(client: &mut Client, prefix: &str, timeout: Duration) -> Result<WatchStream> {
    let setup = async {
        let mut stream = client.watch(prefix, Some(WatchOptions::new().with_prefix())).await?;
        match stream.message().await? {
            Some(resp) if resp.created() && !resp.canceled() => Ok(stream),
            Some(resp) => Err(Error::Setup(format!("watch on {prefix} not created (canceled={}, reason {:?})", resp.canceled(), resp.cancel_reason()))),
            None => Err(Error::Setup(format!("watch stream on {prefix} closed before it was created"))),
        }
    };
    match tokio::time::timeout(timeout, setup).await {
        Ok(r) => r,
        Err(_) => Err(Error::Setup(format!("watch on {prefix} not created within {:.1} s", timeout.as_secs_f64()))),
    }
}

/// Reads events until told how many to expect and has them all, the drain
/// deadline passes, the hard deadline passes, or `max_messages` arrive.
async fn watch_loop(mut stream: WatchStream, mut stop: watch::Receiver<Option<Stop>>, epoch: Instant, hard_deadline: Instant, max_messages: u64) -> WatcherResult {
    let mut stats = Stats::new();
    let mut last_event = None;
    let mut limit = *stop.borrow_and_update();
    for _ in 0..max_messages {
        if limit.is_some_and(|s| stats.ops >= s.expected) {
            break;
        }
        let until = limit.map_or(hard_deadline, |s| s.drain_deadline.min(hard_deadline));
        tokio::select! {
            changed = stop.changed(), if limit.is_none() => {
                limit = match changed {
                    Ok(()) => *stop.borrow_and_update(),
                    // The run is over without a verdict: stop now.
                    Err(_) => Some(Stop { expected: 0, drain_deadline: Instant::now() }),
                };
            }
            msg = tokio::time::timeout_at(until.into(), stream.message()) => match msg {
                Err(_) => break,
                Ok(Ok(Some(resp))) => {
                    if resp.canceled() {
                        stats.record_err(format!("watch canceled: {:?}", resp.cancel_reason()));
                        break;
                    }
                    let now = nanos_since(epoch);
                    for ev in resp.events() {
                        match ev.kv().and_then(|kv| decode_ts_value(kv.value())) {
                            Some(sent) => {
                                stats.ops += 1;
                                stats.record_latency(Duration::from_nanos(now.saturating_sub(sent)));
                            }
                            None => stats.record_err("watch event without a send timestamp"),
                        }
                    }
                    if !resp.events().is_empty() {
                        last_event = Some(Instant::now());
                    }
                }
                Ok(Ok(None)) => {
                    stats.record_err("watch stream closed by the server");
                    break;
                }
                Ok(Err(e)) => {
                    stats.record_err(format!("watch stream: {e}"));
                    break;
                }
            }
        }
    }
    WatcherResult { stats, last_event }
}

/// Puts keys of `keys` at `rate` per second until `tickets` run out.
/// Returns the Puts' stats: `ops` = acknowledged Puts.
#[allow(clippy::too_many_arguments)]
async fn write_paced(kv: &mut KvClient, keys: &KeySpace, tickets: &Tickets, rate: f64, inflight: usize, val_size: usize, epoch: Instant, request_timeout: Duration) -> Stats {
    let start = Instant::now();
    let permits = Arc::new(Semaphore::new(inflight));
    let mut puts: JoinSet<Stats> = JoinSet::new();
    let mut done = Stats::new();
    let mut n: u64 = 0;
    while tickets.take() {
        // Open-loop schedule: put n is due at start + n / rate, so a stall
        // is caught up rather than lowering the rate.
        let due = start + Duration::from_secs_f64(n as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            break;
        };
        let key = keys.key(n);
        let mut kv = kv.clone();
        puts.spawn(async move {
            let mut stats = Stats::new();
            let sent = nanos_since(epoch);
            let value = encode_ts_value(sent, val_size);
            let t0 = Instant::now();
            match tokio::time::timeout(request_timeout, kv.put(key, value, None)).await {
                Ok(Ok(_)) => stats.record_ok(t0.elapsed()),
                Ok(Err(e)) => stats.record_err(e),
                Err(_) => stats.record_err(Error::Timeout(request_timeout.as_secs_f64())),
            }
            drop(permit);
            stats
        });
        while let Some(res) = puts.try_join_next() {
            match res {
                Ok(s) => done.merge(&s),
                Err(e) => done.record_err(format!("put task failed: {e}")),
            }
        }
        n += 1;
    }
    let rest = join_stats(puts, Instant::now() + request_timeout + Duration::from_secs(5)).await;
    done.merge(&rest);
    done
}
