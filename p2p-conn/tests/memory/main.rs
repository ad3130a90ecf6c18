//! The memory tests of `p2p-conn`: a binary of their own, whose global
//! allocator counts every allocation ([`p2p_conn_interop::alloc`]). Each
//! test holds [`common::serial`] for its whole run, so no other test of
//! this process allocates while it counts.

#[path = "../common/mod.rs"]
mod common;

#[global_allocator]
static ALLOC: p2p_conn_interop::alloc::Counting = p2p_conn_interop::alloc::Counting;

mod handshake_memory;
#[cfg(feature = "queue")]
mod idle_memory;
#[cfg(feature = "nodeinfo")]
mod nodeinfo_memory;
#[cfg(feature = "queue")]
mod queue_allocations;
