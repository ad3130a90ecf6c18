//! `mconn_packets`: the MConnection core's receive side and packet decoder
//! on any bytes.

use crate::Seeds;
use std::time::Instant;

use p2p_conn_mconn::pex::PexMessage;
use p2p_conn_mconn::testkit::{encode_packet, Packet, PacketDecoder};
use p2p_conn_mconn::{
    ChannelDescriptor, Event, MConnConfig, MConnCore, MConnError,
    DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE,
};

/// The receive cap of channel 0x20 (small, so the fuzzer reaches it).
const SMALL_CAP: usize = 3000;

fn core(now: Instant) -> MConnCore {
    let channels = [
        ChannelDescriptor::new(0x00).with_recv_message_capacity(64_000),
        ChannelDescriptor::new(0x20).with_recv_message_capacity(SMALL_CAP),
        ChannelDescriptor::new(0xc0),
    ];
    MConnCore::new(MConnConfig::default(), &channels, now).expect("a valid config")
}

/// Every event of `data` fed in pieces of `chunk` bytes, and the error that
/// stopped it; with the receive buffers checked against their caps after
/// every call.
fn run(data: &[u8], chunk: usize) -> (Vec<Event>, Option<MConnError>, MConnCore) {
    let now = Instant::now();
    let mut c = core(now);
    let mut events = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        let mut rest = piece;
        while !rest.is_empty() {
            match c.handle_input(now, rest) {
                Ok((used, ev)) => {
                    assert!(used <= rest.len());
                    assert!(used > 0 || ev.is_some(), "no progress without a rate limit");
                    rest = &rest[used..];
                    events.extend(ev);
                }
                Err(e) => {
                    assert_eq!(c.error(), Some(&e), "the error sticks");
                    assert_eq!(c.handle_input(now, b"\x02\x0a\x00"), Err(e.clone()));
                    return (events, Some(e), c);
                }
            }
            let s = c
                .stats()
                .channels
                .iter()
                .find(|ch| ch.id == 0x20)
                .copied()
                .expect("channel 0x20");
            assert!(s.receiving <= SMALL_CAP, "reassembly past the cap");
        }
    }
    (events, None, c)
}

/// `mconn_packets`: the first byte sets the chunk size, the rest is the
/// peer's plaintext stream. Fed whole and in chunks, the core must yield the
/// same events and stop with the same error; a channel's reassembly never
/// exceeds its cap; each message re-sent through a second core arrives
/// equal; the packet decoder's packets re-encode to equal packets; PEX
/// messages decode, re-encode and decode equal; no panic.
pub fn check(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (whole, whole_err, _) = run(rest, rest.len());
    let (chunked, chunked_err, mut rx) = run(rest, usize::from(split));
    assert_eq!(whole, chunked, "whole and chunked events differ");
    assert_eq!(whole_err, chunked_err, "whole and chunked errors differ");
    // Pongs owed go out first, then nothing else (nothing was queued).
    let now = Instant::now();
    let mut out = Vec::new();
    rx.poll_transmit(now, &mut out, 1 << 16);
    if rx.error().is_none() && whole.contains(&Event::Ping) {
        assert_eq!(out, [0x02, 0x12, 0x00]);
    } else if rx.error().is_none() {
        assert!(out.is_empty());
    }

    // Every message through a second pair: encoder to decoder.
    let mut tx = core(now);
    for ev in &whole {
        if let Event::Message { channel, data } = ev {
            if data.len() <= 64_000 {
                tx.send(*channel, data.clone())
                    .expect("room for one message");
                let mut wire = Vec::new();
                while tx.poll_transmit(now, &mut wire, 4096) > 0 {}
                let (got, err, _) = run(&wire, wire.len());
                assert_eq!(err, None);
                assert_eq!(got, std::slice::from_ref(ev), "a message re-sent differs");
            }
            if *channel == 0 {
                if let Ok(m) = PexMessage::decode(data) {
                    assert_eq!(PexMessage::decode(&m.encode()), Ok(m));
                }
            }
        }
    }

    // The decoder alone: packets re-encode to what decodes equal.
    let mut dec = PacketDecoder::new(DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE);
    let mut at = 0;
    while at < rest.len() {
        match dec.feed(&rest[at..]) {
            Ok((used, p)) => {
                at += used;
                if let Some(p) = p {
                    reencode(&p);
                }
            }
            Err(_) => break,
        }
    }
    if let Ok(m) = PexMessage::decode(rest) {
        assert_eq!(PexMessage::decode(&m.encode()), Ok(m));
    }
}

fn reencode(p: &Packet) {
    let mut wire = Vec::new();
    let n = encode_packet(p, &mut wire);
    assert_eq!(n, wire.len());
    // Re-encoded packets may exceed the limit (a negative channel is ten
    // bytes): decode with room.
    let mut dec = PacketDecoder::new(2 * DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE);
    let (used, again) = dec.feed(&wire).expect("our own encoding");
    assert_eq!(used, wire.len());
    assert_eq!(again.as_ref(), Some(p), "a packet re-encoded differs");
}

/// The seeds this check owns, written to `seeds/mconn_packets/` by
/// `gen_seeds`: a chunk size, then the peer's plaintext (packets made by the
/// library's own encoder, and hostile ones by hand).
pub fn seeds() -> Seeds {
    use crate::cat;
    let mut s = Seeds::default();
    use p2p_conn_mconn::pex::{NetAddress, PexMessage};
    use p2p_conn_mconn::testkit::{encode_packet, Packet, PacketMsg};
    use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnCore};
    use std::time::Instant;

    let now = Instant::now();
    let chans = [
        ChannelDescriptor::new(0x00),
        ChannelDescriptor::new(0x20),
        ChannelDescriptor::new(0xc0),
    ];
    let mut tx = MConnCore::new(MConnConfig::default(), &chans, now).unwrap();
    let addrs = (0..40)
        .map(|i| NetAddress {
            id: format!("{i:040x}"),
            ip: format!("10.0.0.{i}"),
            port: 26656,
        })
        .collect();
    tx.send(0x00, PexMessage::Request.encode()).unwrap();
    tx.send(0x20, (0..2500u32).map(|i| i as u8).collect())
        .unwrap();
    tx.send(0xc0, vec![0xab; 3000]).unwrap();
    tx.send(0x00, PexMessage::Addrs(addrs).encode()).unwrap();
    tx.send(0x20, Vec::new()).unwrap();
    let mut stream = Vec::new();
    while tx.poll_transmit(now, &mut stream, 4096) > 0 {}
    s.add("channels-chunk13", &cat(&[&[13], &stream]));
    s.add("channels-whole", &cat(&[&[0], &stream]));

    let msg = |channel_id: i32, eof: bool, data: Vec<u8>| {
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
    };
    let mut ping_pong = Vec::new();
    encode_packet(&Packet::Ping, &mut ping_pong);
    encode_packet(&Packet::Pong, &mut ping_pong);
    encode_packet(&Packet::Ping, &mut ping_pong);
    s.add("ping-pong-ping", &cat(&[&[1], &ping_pong]));
    // eof never set on 0x20 (cap 3000 in the check).
    let piece = msg(0x20, false, vec![0x55; 1024]);
    s.add(
        "never-ends",
        &cat(&[&[200], &piece, &piece, &piece, &piece]),
    );
    s.add(
        "unknown-channel",
        &cat(&[&[3], &msg(0x21, true, b"hi".to_vec())]),
    );
    s.add(
        "negative-channel",
        &cat(&[&[3], &msg(-1, true, b"hi".to_vec())]),
    );
    s.add("oversized-prefix", &[1, 0x8b, 0x08]);
    s.add("garbage-protobuf", &[2, 0x03, 0x1a, 0x05, 0x08]);
    s.add("empty-packet", &[2, 0x00, 0x02, 0x0a, 0x00]);
    s
}
