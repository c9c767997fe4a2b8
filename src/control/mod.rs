//! (skeleton)
pub mod client;
