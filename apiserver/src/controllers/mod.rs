//! Background loops the apiserver runs itself until a controller manager
//! exists.

pub mod namespace;
