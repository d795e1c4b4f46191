//! Request filters, one per file, composed in
//! [`super::build_handler_chain`].

pub mod audit;
pub mod audit_init;
pub mod authentication;
pub mod authn_audit;
pub mod authorization;
pub mod impersonation;
pub mod request_info;
pub mod storage_ready;
