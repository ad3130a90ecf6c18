//! Adapters: thin layers that connect the sans-IO core (through
//! [`crate::engine`]) to real transports.

pub mod blocking;
pub mod codec;
pub mod tokio;
