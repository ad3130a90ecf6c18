//! CometBFT's MConnection: the multiplexed packet layer a node speaks above
//! the secret connection and the NodeInfo exchange, as a sans-IO core; and
//! PEX on channel `0x00` (the messages and CometBFT's rules for them); with feature `tokio` (a default), the adapter that runs it over a live secret connection
//! ([`MConnection::spawn`]) and writes through the send queue.
//!
//! A CometBFT node keeps a peer only while the peer speaks MConnection:
//! varint-delimited `Packet`s (`PacketPing`, `PacketPong`, `PacketMsg`),
//! messages cut into pieces of at most `max_packet_msg_payload_size` bytes
//! (1024) on channels with priorities, a ping every 60 s answered within
//! 45 s, and a stop on any packet for a channel it does not have.
//! `spec/mconn.md` gives the wire and every rule.
//!
//! # Design
//! - [`MConnCore`] is the whole connection as a state machine over byte
//!   buffers: no sockets, no tasks, no clock (every call that needs the time
//!   takes `now`). An adapter runs this loop:
//!   - [`MConnCore::send`] queues a message on a channel;
//!   - [`MConnCore::poll_transmit`] appends whole packets, up to a byte
//!     budget, to the caller's buffer: the adapter hands that batch to the
//!     secret connection in one write (which seals it into frames; packets
//!     straddle frames). No flush timer: a batch is whatever is pending;
//!   - [`MConnCore::handle_input`] takes the peer's plaintext in any pieces
//!     and yields one [`Event`] at a time (a whole message, a ping, a pong);
//!   - [`MConnCore::poll_timeout`] says when to call
//!     [`MConnCore::handle_timeout`] (ping due, pong deadline, rate limit).
//! - The packet layer (the core's own; tests, fuzz targets and peers played
//!   by hand reach it through `testkit`) encodes and decodes through
//!   hand-declared protobuf messages (prost, no code generation); the
//!   decoder is the crate's one delimited reader (the same as NodeInfo's
//!   and privval's). `MConnCore` writes its own `PacketMsg`s without
//!   copying the data into a message first; a test holds that writer to
//!   prost's bytes.
//! - [`pex`] holds the PEX messages (`PexRequest`, `PexAddrs`) and, as
//!   sans-IO code, the PEX reactor's rules: address validation, the
//!   requests a node takes (`pex::Requests`), the requests we send
//!   (`pex::Asks`), the size of an answer.
//! - With feature `tokio`, [`MConnection::spawn`] runs the core over a
//!   `SecretConnection` on one task, writing through the crate's send
//!   queue: [`MConnSender`] (cloneable, `send`
//!   waits for room, `try_send` does not) and [`MConnReceiver`] (messages,
//!   then why it closed). Its own docs give its design and guarantees.
//! - With feature `testkit` (off by default; for tests, no stability
//!   promise), `testkit::Pair` wires two cores together in memory on a
//!   test clock, with budgets, split patterns and an event log per side;
//!   `testkit` also holds the packet layer (`Packet`, `encode_packet`,
//!   `PacketDecoder`).
//!
//! # Guarantees
//! - A packet's length prefix over the largest packet (the payload size
//!   plus 10: 1034 bytes by default, CometBFT's value) is refused as soon as it is read, before a
//!   byte of the body is buffered; a body is read into one buffer of at most
//!   that size.
//! - A piece that would take a channel's message past its
//!   `recv_message_capacity` is refused before it is appended: the
//!   reassembly buffer never grows past the cap, so a message that never
//!   ends (`eof` never set) costs at most the cap.
//! - A packet for a channel not in the descriptors (or outside `0..=255`),
//!   a malformed packet or a packet of no known kind stops the connection
//!   with a typed [`MConnError`]; so does a late pong
//!   ([`MConnError::PongTimeout`]). After that every call returns the same
//!   error. No input makes the core panic.
//! - Each channel's send queue holds at most `send_queue_capacity` bytes; a
//!   message that does not fit is refused with
//!   [`MConnError::SendQueueFull`] and the connection goes on
//!   (back-pressure is the caller's: check [`MConnCore::send_room`]).
//! - Packets go out as CometBFT sends them: pong, then ping, then the
//!   pending channel with the least `recently_sent / priority`, with
//!   `recently_sent` decayed by 0.8 every 2 s; byte for byte the encoding
//!   Go's `protoio` writer produces.
//!
//! # Not provided
//! - Without feature `tokio`, no I/O adapter: the core reads no socket and
//!   no clock.
//! - No peer manager or switch (dialing, reconnecting, peer sets, reactors),
//!   no PEX reactor loop: [`pex`] has the rules as verdicts and a seed's
//!   address book ([`pex::book`]), and the caller acts on them; [`blocksync`] only the status messages
//!   (which blocks a node holds), not block sync; [`statesync`] only the
//!   snapshot listing, not state sync.
//! - No `tracing` events from the core (it does not know the peer); the
//!   tokio adapter's name the peer and the channel.
//! - The rate limits are a token bucket, not Go's `flowrate` monitor (see
//!   [`MConnConfig::with_rates`]).
//!
//! # Cargo features
//! With `default-features = false` the crate is the sans-IO core and PEX.
//!
//! | feature | default | what |
//! |---|---|---|
//! | `tokio` | yes | the adapter, `MConnection` (brings p2p-conn's `queue`) |
//! | `ring` | yes | p2p-conn's feature of that name: the secret connection's ring backend |
//! | `avx512` | yes | p2p-conn's feature of that name: its AVX-512 multi-frame engine |
//! | `avx2` | yes | p2p-conn's feature of that name: its AVX2 multi-frame engine |
//! | `testkit` | no | `testkit`: two cores wired in memory on a test clock, and the packet layer; no stability promise, never in production |

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod blocksync;
mod channel;
#[cfg(feature = "tokio")]
mod connection;
mod core;
mod packet;
pub mod pex;
mod ratelimit;
pub mod statesync;
#[cfg(feature = "testkit")]
pub mod testkit;

use std::time::Duration;

pub use self::channel::{
    ChannelDescriptor, ChannelStats, DEFAULT_RECV_MESSAGE_CAPACITY, DEFAULT_SEND_QUEUE_CAPACITY,
};
#[cfg(feature = "tokio")]
pub use self::connection::{
    LastMessage, MConnCloseReason, MConnReceiver, MConnSendError, MConnSender, MConnection,
    Received, CLOSE_TIMEOUT, RECV_BUFFER_BYTES,
};
pub use self::core::{Event, MConnCore, MConnStats};
pub use self::packet::DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE;

/// CometBFT's default ping interval (`pingInterval`, 60 s).
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(60);

/// CometBFT's default pong timeout (`pongTimeout`, 45 s).
pub const DEFAULT_PONG_TIMEOUT: Duration = Duration::from_secs(45);

/// The connection-wide settings (CometBFT's `MConnConfig`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MConnConfig {
    /// The most message bytes in one `PacketMsg`
    /// ([`DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE`]); it also sets the largest
    /// packet accepted (the payload size plus 10). Both sides must agree.
    pub(crate) max_packet_msg_payload_size: usize,
    /// How often to ping ([`DEFAULT_PING_INTERVAL`]).
    pub(crate) ping_interval: Duration,
    /// How long a ping may wait for its pong ([`DEFAULT_PONG_TIMEOUT`]);
    /// less than `ping_interval`, as CometBFT requires.
    pub(crate) pong_timeout: Duration,
    /// A send limit in bytes per second (CometBFT's `send_rate`; `None`,
    /// the default here, sends as fast as the caller writes). A token
    /// bucket refilled at this rate, holding at most 100 ms of it (at
    /// least one full packet): a `PacketMsg` goes when the bucket holds its
    /// size; pings and pongs are never held but are charged. Go's
    /// `flowrate` instead sleeps before each batch of up to 10 packets
    /// until a 100 ms-sampled average is under the rate, so its bursts are
    /// a batch larger; the long-run rate is the same.
    pub(crate) send_rate: Option<u64>,
    /// A receive limit in bytes per second (CometBFT's `recv_rate`; `None`
    /// by default): the next packet is read when the bucket holds a full
    /// packet's worth, and charged its size once read.
    pub(crate) recv_rate: Option<u64>,
}

impl Default for MConnConfig {
    fn default() -> Self {
        MConnConfig {
            max_packet_msg_payload_size: DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE,
            ping_interval: DEFAULT_PING_INTERVAL,
            pong_timeout: DEFAULT_PONG_TIMEOUT,
            send_rate: None,
            recv_rate: None,
        }
    }
}

impl MConnConfig {
    /// The same with these keepalive timers: ping every `ping_interval`
    /// ([`DEFAULT_PING_INTERVAL`]); a ping's pong may take `pong_timeout`
    /// ([`DEFAULT_PONG_TIMEOUT`]), which must be less than `ping_interval`,
    /// as CometBFT requires.
    pub fn with_keepalive(mut self, ping_interval: Duration, pong_timeout: Duration) -> Self {
        self.ping_interval = ping_interval;
        self.pong_timeout = pong_timeout;
        self
    }

    /// The same with these rate limits in bytes per second (CometBFT's
    /// `send_rate` and `recv_rate`; `None`, the default here: no limit).
    ///
    /// Sending is a token bucket refilled at the rate, holding at most
    /// 100 ms of it (at least one full packet): a `PacketMsg` goes when the
    /// bucket holds its size; pings and pongs are never held but are
    /// charged. Go's `flowrate` instead sleeps before each batch of up to
    /// 10 packets until a 100 ms-sampled average is under the rate, so its
    /// bursts are a batch larger; the long-run rate is the same. Receiving:
    /// the next packet is read when the bucket holds a full packet's worth,
    /// and charged its size once read.
    pub fn with_rates(mut self, send_rate: Option<u64>, recv_rate: Option<u64>) -> Self {
        self.send_rate = send_rate;
        self.recv_rate = recv_rate;
        self
    }

    /// The same with this payload size: the most message bytes in one
    /// `PacketMsg` ([`DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE`]); it also sets
    /// the largest packet accepted (the payload size plus 10). Both sides
    /// must agree.
    pub fn with_max_packet_msg_payload_size(mut self, bytes: usize) -> Self {
        self.max_packet_msg_payload_size = bytes;
        self
    }

    fn validate(&self) -> Result<(), MConnError> {
        let bad = |why: &str| Err(MConnError::InvalidConfig(why.into()));
        // Two, so a piece on a channel from 0x80 (one byte shorter) is
        // never empty.
        if self.max_packet_msg_payload_size < 2 {
            return bad("max_packet_msg_payload_size under 2");
        }
        if self.max_packet_msg_payload_size > 1 << 30 {
            return bad("max_packet_msg_payload_size over 1 GiB");
        }
        if self.ping_interval.is_zero() {
            return bad("ping_interval is 0");
        }
        if self.pong_timeout >= self.ping_interval {
            return bad("pong_timeout must be less than ping_interval");
        }
        if self.send_rate == Some(0) || self.recv_rate == Some(0) {
            return bad("a rate of 0 (use None for no limit)");
        }
        Ok(())
    }
}

/// Why the MConnection refused something. All but
/// [`SendQueueFull`](Self::SendQueueFull) and a refused
/// [`send`](MConnCore::send) to an unknown channel stop the connection.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MConnError {
    /// A packet length prefix that is not a varint (over 64 bits).
    #[error("bad packet length prefix")]
    BadLength,
    /// A packet longer than the most this connection accepts.
    #[error("packet of {len} bytes, over the maximum of {max}")]
    PacketTooLarge {
        /// The announced length.
        len: u64,
        /// The maximum (the payload size plus 10).
        max: usize,
    },
    /// A packet that is not valid protobuf.
    #[error("malformed packet: {0}")]
    Malformed(String),
    /// A packet that is none of ping, pong and msg.
    #[error("packet of no known kind")]
    UnknownPacket,
    /// A channel the connection does not have (the peer's `int32`, which
    /// may be outside `0..=255`).
    #[error("unknown channel {0:#x}")]
    UnknownChannel(i32),
    /// A message over its channel's `recv_message_capacity`.
    #[error("message on channel {channel:#04x} reaches {len} bytes, over the channel's capacity of {capacity}")]
    RecvMessageTooLarge {
        /// The channel.
        channel: u8,
        /// The bytes the message would hold with the refused piece.
        len: usize,
        /// The channel's cap.
        capacity: usize,
    },
    /// No pong within the pong timeout after our ping.
    #[error("pong timeout")]
    PongTimeout,
    /// A message that does not fit its channel's send queue (not a
    /// connection error: the message is dropped, the connection goes on).
    #[error("send queue of channel {channel:#04x} full: {queued} of {capacity} bytes queued, message of {len}")]
    SendQueueFull {
        /// The channel.
        channel: u8,
        /// The refused message's length.
        len: usize,
        /// Bytes already queued.
        queued: usize,
        /// The channel's send cap.
        capacity: usize,
    },
    /// A configuration the core refuses (duplicate channel, priority 0,
    /// pong timeout not under the ping interval, ...).
    #[error("invalid MConnection configuration: {0}")]
    InvalidConfig(String),
}
