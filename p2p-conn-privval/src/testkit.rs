//! The wire envelope, the request and response types and the message
//! stream, for tests, fuzz targets and peers played by hand (feature
//! `testkit`; no stability promise, never for production). A signer
//! implements [`crate::Signer`] and a node calls
//! [`crate::endpoint::SignerClient`] instead; the endpoints run these.
//!
//! - [`Message`] and [`message::Sum`]: one request or response, and the
//!   types each variant holds.
//! - [`MessageDecoder`]: the sans-IO reader. It takes exactly one
//!   message's bytes at a time, checks the length prefix against its limit
//!   before it allocates, and names what went wrong in a
//!   [`crate::PrivvalError`]. [`encode`] writes a message with its prefix.
//! - [`read()`] and [`write()`] (feature `tokio`): one message over a tokio
//!   stream (a `SecretConnection`, or a `BufReader` over a `UnixStream`),
//!   with no timeout of their own.

pub use crate::codec::{encode, MessageDecoder};
pub use crate::envelope::{
    message, Message, PingRequest, PingResponse, PubKeyRequest, PubKeyResponse, SignBytesRequest,
    SignBytesResponse, SignProposalRequest, SignVoteRequest, SignedProposalResponse,
    SignedVoteResponse,
};
#[cfg(feature = "tokio")]
pub use crate::tokio::{read, write};
