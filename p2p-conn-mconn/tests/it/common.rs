//! MConnection wire bytes for tests that play a peer by hand.

use p2p_conn_mconn::testkit::{encode_packet, Packet, PacketMsg};

/// One encoded (length-prefixed) `PacketMsg`.
pub fn msg_packet(channel_id: i32, eof: bool, data: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_packet(
        &Packet::Msg(PacketMsg {
            channel_id,
            eof,
            data,
        }),
        &mut out,
    );
    out
}

/// One channel's counters in a stats snapshot (`None`: unknown channel),
/// as `MConnCore::stats` or `MConnSender::stats` give them.
pub fn channel(stats: &p2p_conn_mconn::MConnStats, id: u8) -> Option<p2p_conn_mconn::ChannelStats> {
    stats.channels.iter().find(|c| c.id == id).copied()
}
