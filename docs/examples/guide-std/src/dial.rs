// Generated from a Rust block of docs/library-guide.md; edit the document.
use std::io::{BufWriter, Write};
use std::net::TcpStream;

use p2p_conn::io::blocking::{handshake_tcp, SecretConnection};
use p2p_conn::{keyfile, Config};

fn dial(addr: &str) -> Result<SecretConnection<TcpStream>, Box<dyn std::error::Error>> {
    let identity = keyfile::load("node_key.json")?;
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    Ok(handshake_tcp(tcp, &identity, &Config::default())?) // enforces handshake_timeout
}

/// Small records gathered into full frames and few writes.
fn send_records(conn: &mut SecretConnection<TcpStream>, records: &[[u8; 12]]) -> std::io::Result<()> {
    let mut out = BufWriter::new(&mut *conn);
    for r in records {
        out.write_all(r)?;
    }
    out.flush()?; // hands the rest to the connection, which writes it
    drop(out);
    println!("{}", conn.stats().send); // "send: 1 s of sealing needed … (12 frames, …)"
    Ok(())
}
