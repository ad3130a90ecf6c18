//! Adapters: thin layers that connect the sans-IO core (through
//! [`crate::engine`]) to real transports.

pub mod blocking;
pub mod codec;
pub mod tokio;

/// Accessors shared by every adapter's connection type (fields `io`,
/// `reader`, `writer`, `remote`).
macro_rules! connection_accessors {
    () => {
        /// The peer's authenticated Ed25519 public key.
        pub fn remote_public_key(&self) -> crate::PublicKey {
            self.remote
        }
        /// The peer's node ID.
        pub fn remote_node_id(&self) -> crate::NodeId {
            self.remote.node_id()
        }
        /// The underlying transport.
        pub fn get_ref(&self) -> &T {
            &self.io
        }
        /// Bytes of buffer memory this connection holds now.
        pub fn buffer_capacity(&self) -> usize {
            self.reader.buffer_capacity() + self.writer.buffer_capacity()
        }
        /// Free the read and write buffers if they hold no undelivered bytes
        /// (they are reallocated on next use). A tokio connection already frees
        /// its read buffer whenever a read finds nothing to do; a blocking
        /// reader keeps it while it waits in `read`. For callers with their own
        /// idle policy.
        pub fn release_buffers(&mut self) {
            self.reader.release_buffer();
            self.writer.release_buffer();
        }
    };
}
pub(crate) use connection_accessors;
