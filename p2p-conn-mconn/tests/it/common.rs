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
