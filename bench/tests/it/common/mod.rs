//! Helpers shared by the integration tests.

pub mod etcd;
pub mod loadgen;
