//! A chaos harness for raftstore, in the spirit of etcd's robustness tests
//! and Jepsen: it runs a three-member cluster as processes on loopback (our
//! `raftstore` or the Debian `etcd`), routes peer traffic through a
//! fault-injecting TCP proxy, drives concurrent etcd clients and watchers,
//! injects one fault per phase, records every operation, and checks the
//! history (see [`check`]).
//!
//! Modules: [`history`] (the recorded data), [`check`] (checkers),
//! [`proxy`] (peer proxy), [`cluster`] (processes), [`workload`] (clients
//! and watchers), [`fault`] (the faults) and [`run`] (one phase per fault,
//! reports).

pub mod check;
pub mod cluster;
pub mod fault;
pub mod history;
pub mod proxy;
pub mod run;
pub mod workload;
