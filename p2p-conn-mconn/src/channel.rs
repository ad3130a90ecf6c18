//! Channel descriptors, per-channel state and the per-channel counters.

use std::collections::VecDeque;

/// CometBFT's default `RecvMessageCapacity` (`defaultRecvMessageCapacity`):
/// the largest message a channel reassembles, in bytes (21 MiB).
pub const DEFAULT_RECV_MESSAGE_CAPACITY: usize = 22_020_096;

/// The default byte cap of a channel's send queue (1 MiB). CometBFT counts
/// its queue in messages (default 1, with a blocking `Send`); this core
/// counts bytes and refuses what does not fit.
pub const DEFAULT_SEND_QUEUE_CAPACITY: usize = 1 << 20;

/// One channel both sides have: its ID, its share of the send bandwidth and
/// its caps.
///
/// Build one with [`ChannelDescriptor::new`] and the `with_*` methods (the
/// type is `#[non_exhaustive]`, so a struct literal does not compile outside
/// this crate; the fields can be read and set). A connection's channels are
/// a slice of these, which [`MConnCore::new`](crate::MConnCore::new) and
/// `MConnection::spawn` take; [`ChannelDescriptor::ids`] gives the IDs its
/// NodeInfo announces.
///
/// ```
/// use p2p_conn_mconn::pex::{MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
/// use p2p_conn_mconn::ChannelDescriptor;
///
/// // PEX as CometBFT declares it: priority 1, messages up to 64000 bytes.
/// let pex = ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE);
/// // An application's channel: twice PEX's share of the send bandwidth,
/// // messages up to 1 MiB, at most 4 MiB waiting to be sent.
/// let app = ChannelDescriptor::new(0x77)
///     .with_priority(2)
///     .with_recv_message_capacity(1 << 20)
///     .with_send_queue_capacity(4 << 20);
/// let channels = [pex, app];
///
/// assert_eq!(pex.priority, 1);
/// assert_eq!(app.send_queue_capacity, 4 << 20);
/// // What the NodeInfo sent with these channels announces
/// // (`NodeInfo::channels`).
/// assert_eq!(ChannelDescriptor::ids(&channels), [0x00, 0x77]);
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ChannelDescriptor {
    /// The channel's ID (`0x00` is PEX on CometBFT nodes).
    pub id: u8,
    /// The channel's weight in the send selection (at least 1): the next
    /// packet goes to the pending channel with the least
    /// `recently_sent / priority`.
    pub priority: u32,
    /// The most bytes of messages waiting to be sent on this channel (an
    /// empty message counts as one byte).
    pub send_queue_capacity: usize,
    /// The largest message this channel reassembles, in bytes
    /// (CometBFT's `RecvMessageCapacity`).
    pub recv_message_capacity: usize,
}

impl ChannelDescriptor {
    /// A channel with priority 1, [`DEFAULT_SEND_QUEUE_CAPACITY`] and
    /// [`DEFAULT_RECV_MESSAGE_CAPACITY`].
    pub const fn new(id: u8) -> ChannelDescriptor {
        ChannelDescriptor {
            id,
            priority: 1,
            send_queue_capacity: DEFAULT_SEND_QUEUE_CAPACITY,
            recv_message_capacity: DEFAULT_RECV_MESSAGE_CAPACITY,
        }
    }

    /// The same with `priority`.
    pub const fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// The same with a send queue cap of `bytes`.
    pub const fn with_send_queue_capacity(mut self, bytes: usize) -> Self {
        self.send_queue_capacity = bytes;
        self
    }

    /// The channel IDs of `channels`, in order: what the NodeInfo of a
    /// connection with these channels announces (`NodeInfo::channels`), so
    /// the two lists cannot disagree. A peer stops us for a message on a
    /// channel it does not have, and we stop it for one on a channel we do
    /// not have.
    pub fn ids(channels: &[ChannelDescriptor]) -> Vec<u8> {
        channels.iter().map(|c| c.id).collect()
    }

    /// The same with a receive cap of `bytes`.
    pub const fn with_recv_message_capacity(mut self, bytes: usize) -> Self {
        self.recv_message_capacity = bytes;
        self
    }
}

/// A snapshot of one channel's counters.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct ChannelStats {
    /// The channel's ID.
    pub id: u8,
    /// Whole messages sent (their last packet was handed out).
    pub messages_sent: u64,
    /// Message bytes sent (payload, not packet overhead).
    pub bytes_sent: u64,
    /// `PacketMsg`s sent.
    pub packets_sent: u64,
    /// Whole messages received.
    pub messages_received: u64,
    /// Message bytes received (payload).
    pub bytes_received: u64,
    /// `PacketMsg`s received.
    pub packets_received: u64,
    /// Messages waiting in the send queue (the one being cut included).
    pub queued_messages: usize,
    /// Bytes waiting in the send queue (what is left of the one being cut
    /// included).
    pub queued_bytes: usize,
    /// Bytes of a message being reassembled.
    pub receiving: usize,
    /// CometBFT's `recentlySent`: wire bytes sent, decayed by 0.8 every 2 s.
    pub recently_sent: i64,
}

impl std::fmt::Display for ChannelStats {
    /// One line: `0x20: sent 12 messages (3000 B, 3 packets), received …,
    /// queued …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:#04x}: sent {} messages ({} B, {} packets), received {} messages ({} B, {} packets), \
             queued {} messages ({} B), reassembling {} B",
            self.id,
            self.messages_sent,
            self.bytes_sent,
            self.packets_sent,
            self.messages_received,
            self.bytes_received,
            self.packets_received,
            self.queued_messages,
            self.queued_bytes,
            self.receiving
        )
    }
}

/// One channel's live state.
#[derive(Debug)]
pub(super) struct Channel {
    pub(super) desc: ChannelDescriptor,
    /// Messages to send; the front one is cut from `offset`.
    pub(super) queue: VecDeque<Vec<u8>>,
    pub(super) offset: usize,
    /// Bytes charged against `send_queue_capacity`.
    pub(super) queued_bytes: usize,
    pub(super) recently_sent: i64,
    /// The message being reassembled.
    pub(super) recving: Vec<u8>,
    pub(super) stats: ChannelStats,
}

impl Channel {
    pub(super) fn new(desc: ChannelDescriptor) -> Channel {
        Channel {
            desc,
            queue: VecDeque::new(),
            offset: 0,
            queued_bytes: 0,
            recently_sent: 0,
            recving: Vec::new(),
            stats: ChannelStats {
                id: desc.id,
                ..ChannelStats::default()
            },
        }
    }

    /// What a message of `len` bytes costs against the send cap.
    pub(super) fn cost(len: usize) -> usize {
        len.max(1)
    }

    pub(super) fn snapshot(&self) -> ChannelStats {
        ChannelStats {
            queued_messages: self.queue.len(),
            queued_bytes: self.queued_bytes,
            receiving: self.recving.len(),
            recently_sent: self.recently_sent,
            ..self.stats
        }
    }

    /// CometBFT's `updateStats`: `recentlySent = int64(float64(recentlySent) * 0.8)`.
    pub(super) fn decay(&mut self) {
        self.recently_sent = (self.recently_sent as f64 * 0.8) as i64;
    }
}
