//! Request filters, one per file, composed in
//! [`super::build_handler_chain`].

pub mod authentication;
pub mod authorization;
pub mod impersonation;
pub mod request_info;
pub mod storage_ready;
