//! [`MConnCore`]: the MConnection state machine.

use std::time::{Duration, Instant};

use super::channel::{Channel, ChannelDescriptor, ChannelStats};
use super::packet::{self, Packet, PacketDecoder};
use super::ratelimit::Bucket;
use super::{MConnConfig, MConnError};

/// CometBFT's `updateStats` period: `recentlySent` decays by 0.8 this often.
const DECAY_PERIOD: Duration = Duration::from_secs(2);

/// What the peer's bytes gave.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A whole message on a channel.
    Message {
        /// The channel.
        channel: u8,
        /// The message.
        data: Vec<u8>,
    },
    /// The peer pinged; the core has queued the pong (one pong answers
    /// every ping not yet answered, as CometBFT does).
    Ping,
    /// The peer answered our ping; the pong deadline is cleared.
    Pong,
}

/// Keepalive and packet counters of the whole connection.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MConnStats {
    /// Pings sent.
    pub pings_sent: u64,
    /// Pings received.
    pub pings_received: u64,
    /// Pongs sent.
    pub pongs_sent: u64,
    /// Pongs received.
    pub pongs_received: u64,
    /// Wire bytes handed out by [`MConnCore::poll_transmit`].
    pub bytes_out: u64,
    /// Wire bytes taken by [`MConnCore::handle_input`].
    pub bytes_in: u64,
    /// Every channel, in descriptor order.
    pub channels: Vec<ChannelStats>,
}

impl std::fmt::Display for MConnStats {
    /// The totals on one line (`mconn: pings 2 sent, 2 received; pongs …;
    /// 1200 B out, 800 B in`), then one line per channel
    /// ([`ChannelStats`]'s `Display`). The secret connection's seal and
    /// write figures are the send queue's (`MConnSender::queue_stats`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mconn: pings {} sent, {} received; pongs {} sent, {} received; {} B out, {} B in",
            self.pings_sent,
            self.pings_received,
            self.pongs_sent,
            self.pongs_received,
            self.bytes_out,
            self.bytes_in
        )?;
        for c in &self.channels {
            write!(f, "\n  {c}")?;
        }
        Ok(())
    }
}

/// The sans-IO MConnection: channels, packets, keepalive and rate limits,
/// with the clock passed in. See the [module docs](super) for the loop an
/// adapter runs.
#[derive(Debug)]
pub struct MConnCore {
    config: MConnConfig,
    channels: Vec<Channel>,
    /// Channel ID to index in `channels`.
    index: [Option<u8>; 256],
    decoder: PacketDecoder,
    max_wire: usize,
    ping_due: bool,
    pong_due: bool,
    next_ping: Instant,
    pong_deadline: Option<Instant>,
    next_decay: Instant,
    send_bucket: Option<Bucket>,
    recv_bucket: Option<Bucket>,
    /// Set when the send limit held back a pending packet.
    send_held: bool,
    /// Set when the receive limit held back the next packet.
    recv_held: bool,
    stats: MConnStats,
    failed: Option<MConnError>,
    /// The channel of the last whole message handed out, and when.
    last_message_sent: Option<(u8, Instant)>,
}

impl MConnCore {
    /// A connection with these channels, started at `now` (the first ping
    /// is due at `now + ping_interval`).
    pub fn new(
        config: MConnConfig,
        channels: &[ChannelDescriptor],
        now: Instant,
    ) -> Result<MConnCore, MConnError> {
        config.validate()?;
        let mut index = [None; 256];
        for (i, d) in channels.iter().enumerate() {
            if d.priority == 0 {
                return Err(MConnError::InvalidConfig(format!(
                    "channel {:#04x}: priority 0",
                    d.id
                )));
            }
            if index[usize::from(d.id)].replace(i as u8).is_some() {
                return Err(MConnError::InvalidConfig(format!(
                    "channel {:#04x} listed twice",
                    d.id
                )));
            }
        }
        let payload = config.max_packet_msg_payload_size;
        let max_wire = packet::max_packet_wire_size(payload);
        Ok(MConnCore {
            channels: channels.iter().copied().map(Channel::new).collect(),
            index,
            decoder: PacketDecoder::new(payload),
            max_wire,
            ping_due: false,
            pong_due: false,
            next_ping: now + config.ping_interval,
            pong_deadline: None,
            next_decay: now + DECAY_PERIOD,
            send_bucket: config.send_rate.map(|r| Bucket::new(r, max_wire, now)),
            recv_bucket: config.recv_rate.map(|r| Bucket::new(r, max_wire, now)),
            send_held: false,
            recv_held: false,
            stats: MConnStats::default(),
            failed: None,
            last_message_sent: None,
            config,
        })
    }

    /// The most bytes one packet takes on the wire (1036 by default): a
    /// [`poll_transmit`](Self::poll_transmit) budget of at least this always
    /// makes progress when something is pending.
    pub fn max_packet_wire_size(&self) -> usize {
        self.max_wire
    }

    /// The error that stopped the connection, if any. Every call that can
    /// fail returns it again; [`poll_transmit`](Self::poll_transmit) hands
    /// out nothing more.
    pub fn error(&self) -> Option<&MConnError> {
        self.failed.as_ref()
    }

    fn fail(&mut self, e: MConnError) -> MConnError {
        self.failed = Some(e.clone());
        e
    }

    fn channel_index(&self, id: u8) -> Option<usize> {
        self.index[usize::from(id)].map(usize::from)
    }

    /// Queues `message` on `channel`. Refused, and dropped, when the channel
    /// is unknown ([`MConnError::UnknownChannel`]) or its send queue lacks
    /// room ([`MConnError::SendQueueFull`]: back-pressure; the connection
    /// goes on). [`send_room`](Self::send_room) tells beforehand.
    pub fn send(&mut self, channel: u8, message: Vec<u8>) -> Result<(), MConnError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let Some(i) = self.channel_index(channel) else {
            return Err(MConnError::UnknownChannel(i32::from(channel)));
        };
        let ch = &mut self.channels[i];
        let cost = Channel::cost(message.len());
        if cost > ch.desc.send_queue_capacity - ch.queued_bytes {
            return Err(MConnError::SendQueueFull {
                channel,
                len: message.len(),
                queued: ch.queued_bytes,
                capacity: ch.desc.send_queue_capacity,
            });
        }
        ch.queued_bytes += cost;
        ch.queue.push_back(message);
        Ok(())
    }

    /// Bytes `channel`'s send queue has room for (`None`: unknown channel).
    pub fn send_room(&self, channel: u8) -> Option<usize> {
        let ch = &self.channels[self.channel_index(channel)?];
        Some(ch.desc.send_queue_capacity - ch.queued_bytes)
    }

    /// Whether a packet is waiting to go out (a pong, a ping or a message),
    /// rate limit aside.
    pub fn wants_to_transmit(&self) -> bool {
        self.failed.is_none()
            && (self.ping_due || self.pong_due || self.channels.iter().any(|c| !c.queue.is_empty()))
    }

    fn catch_up(&mut self, now: Instant) {
        if now < self.next_decay {
            return;
        }
        let behind = now - self.next_decay;
        let ticks = behind.as_nanos() / DECAY_PERIOD.as_nanos() + 1;
        // 0.8^200 * i64::MAX < 1: past that every counter is 0.
        for _ in 0..ticks.min(200) {
            for c in &mut self.channels {
                c.decay();
            }
        }
        self.next_decay += DECAY_PERIOD * (ticks.min(u128::from(u32::MAX)) as u32);
    }

    /// Appends whole packets to `out`, at most `budget` bytes of them: the
    /// pong owed, then the ping due, then `PacketMsg`s, each from the pending
    /// channel with the least `recently_sent / priority` (CometBFT's rule).
    /// Returns the bytes appended (0 when nothing is pending, the send rate
    /// limit holds it back, the next packet does not fit the budget, or the
    /// connection has failed). Hand the batch to the socket in one write.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>, budget: usize) -> usize {
        if self.failed.is_some() {
            return 0;
        }
        self.catch_up(now);
        self.send_held = false;
        let start = out.len();
        let used = |out: &Vec<u8>| out.len() - start;
        if self.pong_due && used(out) + 3 <= budget {
            let n = packet::encode_packet(&Packet::Pong, out);
            self.pong_due = false;
            self.stats.pongs_sent += 1;
            if let Some(b) = &mut self.send_bucket {
                b.take(n);
            }
        }
        if self.ping_due && used(out) + 3 <= budget {
            let n = packet::encode_packet(&Packet::Ping, out);
            self.ping_due = false;
            self.stats.pings_sent += 1;
            // An earlier deadline still pending stays (Go's earlier pong
            // timer still fires).
            self.pong_deadline
                .get_or_insert(now + self.config.pong_timeout);
            if let Some(b) = &mut self.send_bucket {
                b.take(n);
            }
        }
        let payload = self.config.max_packet_msg_payload_size;
        while let Some(i) = self.select() {
            let ch = &mut self.channels[i];
            let msg = &ch.queue[0];
            let rest = msg.len() - ch.offset;
            let take = rest.min(packet::piece_size(ch.desc.id, payload));
            let eof = take == rest;
            let size = packet::msg_wire_size(ch.desc.id, eof, take);
            if used(out) + size > budget {
                break;
            }
            if let Some(b) = &mut self.send_bucket {
                if !b.allows(size, now) {
                    self.send_held = true;
                    break;
                }
                b.take(size);
            }
            let piece = &msg[ch.offset..ch.offset + take];
            let n = packet::encode_msg(ch.desc.id, eof, piece, out);
            ch.recently_sent = ch.recently_sent.saturating_add(n as i64);
            ch.stats.packets_sent += 1;
            ch.stats.bytes_sent += take as u64;
            if eof {
                let done = ch.queue.pop_front().map_or(0, |m| m.len());
                ch.queued_bytes -= Channel::cost(done) - (done - rest);
                ch.offset = 0;
                ch.stats.messages_sent += 1;
                self.last_message_sent = Some((ch.desc.id, now));
            } else {
                ch.offset += take;
                ch.queued_bytes -= take;
            }
        }
        let n = used(out);
        self.stats.bytes_out += n as u64;
        n
    }

    /// CometBFT's `selectChannelToGossipOn`: the pending channel with the
    /// least `recentlySent / priority` (as `float32`), the first on a tie.
    fn select(&self) -> Option<usize> {
        let mut least = f32::MAX;
        let mut chosen = None;
        for (i, c) in self.channels.iter().enumerate() {
            if c.queue.is_empty() {
                continue;
            }
            let ratio = c.recently_sent as f32 / c.desc.priority as f32;
            if ratio < least {
                least = ratio;
                chosen = Some(i);
            }
        }
        chosen
    }

    /// Takes what it needs of the peer's bytes `input`, up to one event:
    /// how many bytes it took, and the event once complete. Call again with
    /// the rest. When it takes fewer bytes than given with no event, the
    /// receive rate limit holds the next packet back: call again after
    /// [`poll_timeout`](Self::poll_timeout). An error stops the connection.
    pub fn handle_input(
        &mut self,
        now: Instant,
        input: &[u8],
    ) -> Result<(usize, Option<Event>), MConnError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.recv_held = false;
        let mut used = 0;
        loop {
            if used == input.len() {
                return Ok((used, None));
            }
            if self.decoder.is_idle() {
                if let Some(b) = &mut self.recv_bucket {
                    if !b.allows(self.max_wire, now) {
                        self.recv_held = true;
                        return Ok((used, None));
                    }
                }
            }
            let before = self.decoder.partial();
            let (n, packet) = match self.decoder.feed(&input[used..]) {
                Ok(r) => r,
                Err(e) => return Err(self.fail(e)),
            };
            used += n;
            self.stats.bytes_in += n as u64;
            let Some(packet) = packet else { continue };
            if let Some(b) = &mut self.recv_bucket {
                b.take(before + n);
            }
            match packet {
                Packet::Ping => {
                    self.stats.pings_received += 1;
                    self.pong_due = true;
                    return Ok((used, Some(Event::Ping)));
                }
                Packet::Pong => {
                    self.stats.pongs_received += 1;
                    self.pong_deadline = None;
                    return Ok((used, Some(Event::Pong)));
                }
                Packet::Msg(m) => {
                    let index = u8::try_from(m.channel_id)
                        .ok()
                        .and_then(|id| self.channel_index(id));
                    let Some(i) = index else {
                        return Err(self.fail(MConnError::UnknownChannel(m.channel_id)));
                    };
                    let ch = &mut self.channels[i];
                    let cap = ch.desc.recv_message_capacity;
                    let total = ch.recving.len().saturating_add(m.data.len());
                    if total > cap {
                        let channel = ch.desc.id;
                        return Err(self.fail(MConnError::RecvMessageTooLarge {
                            channel,
                            len: total,
                            capacity: cap,
                        }));
                    }
                    ch.stats.packets_received += 1;
                    ch.stats.bytes_received += m.data.len() as u64;
                    if ch.recving.is_empty() && m.eof {
                        // A one-packet message: hand over the packet's buffer.
                        ch.stats.messages_received += 1;
                        let channel = ch.desc.id;
                        return Ok((
                            used,
                            Some(Event::Message {
                                channel,
                                data: m.data,
                            }),
                        ));
                    }
                    if total > ch.recving.capacity() {
                        // Grow by doubling, never past the cap.
                        let want = total.max(ch.recving.capacity() * 2).min(cap);
                        ch.recving.reserve_exact(want - ch.recving.len());
                    }
                    ch.recving.extend_from_slice(&m.data);
                    if m.eof {
                        ch.stats.messages_received += 1;
                        let channel = ch.desc.id;
                        let data = std::mem::take(&mut ch.recving);
                        return Ok((used, Some(Event::Message { channel, data })));
                    }
                }
            }
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next: the
    /// next ping, the pong deadline, or the moment a rate limit lets the
    /// held-back packet through. `None` after a failure.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.failed.is_some() {
            return None;
        }
        let mut t = self.next_ping;
        if let Some(d) = self.pong_deadline {
            t = t.min(d);
        }
        if self.send_held {
            if let Some(b) = &self.send_bucket {
                t = t.min(b.ready_at(self.max_wire));
            }
        }
        if self.recv_held {
            if let Some(b) = &self.recv_bucket {
                t = t.min(b.ready_at(self.max_wire));
            }
        }
        Some(t)
    }

    /// Runs the timers at `now`: a pong deadline passed is
    /// [`MConnError::PongTimeout`] (the connection stops); a ping due is
    /// queued for the next [`poll_transmit`](Self::poll_transmit).
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), MConnError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.catch_up(now);
        if self.pong_deadline.is_some_and(|d| now >= d) {
            return Err(self.fail(MConnError::PongTimeout));
        }
        if now >= self.next_ping {
            self.ping_due = true;
            // A ticker: missed ticks are dropped, the phase is kept.
            let interval = self.config.ping_interval;
            let behind = (now - self.next_ping).as_nanos() / interval.as_nanos() + 1;
            self.next_ping += interval * (behind.min(u128::from(u32::MAX)) as u32);
        }
        Ok(())
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MConnStats {
        MConnStats {
            channels: self.channels.iter().map(Channel::snapshot).collect(),
            ..self.stats.clone()
        }
    }

    /// One channel's counters (`None`: unknown channel), for the tokio
    /// adapter's send path.
    #[cfg(feature = "tokio")]
    pub(crate) fn channel_stats(&self, channel: u8) -> Option<ChannelStats> {
        Some(self.channels[self.channel_index(channel)?].snapshot())
    }

    /// The channel of the last whole message [`poll_transmit`](Self::poll_transmit)
    /// handed out (its last packet), and the `now` it was given then.
    pub fn last_message_sent(&self) -> Option<(u8, Instant)> {
        self.last_message_sent
    }
}
