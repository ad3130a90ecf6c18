//! CometBFT's `addrbook.json`, the file a node loads its address book
//! from at start (`p2p.addr_book_file`; `p2p/pex/file.go`, the same at
//! v0.34 to v1): written by `crawl --addrbook` and by `seed` (its book),
//! read by `seed` at start.
//!
//! The file is `{"key": HEX, "addrs": [...]}`: `key` the book's bucket key
//! (CometBFT makes 24 random bytes, 48 hex digits), each entry `addr` and
//! `src` (`{"id", "ip", "port"}`), `buckets` (indexes into the new table,
//! 0 to 255, or the old one, 0 to 63), `attempts`, `bucket_type` (1 new, 2
//! old: tried and reached), `last_attempt`, `last_success`,
//! `last_ban_time` (RFC 3339; Go's zero time when never). CometBFT loads
//! the entries into the buckets they name, and panics on an index out of
//! range; it does not re-check the index against its hash.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use p2p_conn::NodeId;
use serde_json::{json, Value};

/// Go's zero `time.Time`, as `encoding/json` writes it.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// One address of a book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookEntry {
    pub id: NodeId,
    pub addr: SocketAddr,
    /// In the old table: tried and reached.
    pub good: bool,
    /// Failed tries since the last success.
    pub attempts: u32,
    pub last_attempt: Option<SystemTime>,
    pub last_success: Option<SystemTime>,
}

/// A fresh bucket key: 24 random bytes in hex, as CometBFT makes one.
pub fn new_key() -> String {
    let mut key = [0u8; 24];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut key);
    hex::encode(key)
}

/// The file's JSON.
pub fn to_json(key: &str, entries: &[BookEntry]) -> Value {
    let addrs: Vec<Value> = entries
        .iter()
        .map(|e| {
            let na = json!({"id": e.id.to_string(), "ip": e.addr.ip().to_string(), "port": e.addr.port()});
            let (kind, buckets) = if e.good { (2, 64) } else { (1, 256) };
            json!({
                "addr": na,
                "src": na,
                "buckets": [bucket_of(&e.addr.to_string()) % buckets],
                "attempts": e.attempts,
                "bucket_type": kind,
                "last_attempt": time_text(e.last_attempt),
                "last_success": time_text(e.last_success),
                "last_ban_time": ZERO_TIME,
            })
        })
        .collect();
    json!({"key": key, "addrs": addrs})
}

/// Reads a book: its key and its entries (an entry whose address does not
/// parse is skipped and counted).
pub fn from_json(text: &str) -> Result<(String, Vec<BookEntry>, usize), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let key = v["key"].as_str().unwrap_or_default().to_string();
    let addrs = v["addrs"].as_array().ok_or("no \"addrs\" list")?;
    let mut entries = Vec::new();
    let mut skipped = 0;
    for a in addrs {
        let na = &a["addr"];
        let parsed = (|| {
            let id: NodeId = na["id"].as_str()?.parse().ok()?;
            let ip: std::net::IpAddr = na["ip"].as_str()?.parse().ok()?;
            let port = u16::try_from(na["port"].as_u64()?).ok()?;
            Some((id, SocketAddr::new(ip, port)))
        })();
        let Some((id, addr)) = parsed else {
            skipped += 1;
            continue;
        };
        entries.push(BookEntry {
            id,
            addr,
            good: a["bucket_type"].as_u64() == Some(2),
            attempts: a["attempts"].as_u64().unwrap_or(0) as u32,
            last_attempt: a["last_attempt"].as_str().and_then(parse_time),
            last_success: a["last_success"].as_str().and_then(parse_time),
        });
    }
    Ok((key, entries, skipped))
}

/// Writes `value` to `path` through a file beside it, renamed into place,
/// as CometBFT writes its own: a node never loads half a book.
pub fn write_atomic(path: &std::path::Path, value: &Value) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(value).expect("JSON"))?;
    std::fs::rename(&tmp, path)
}

/// A bucket for an address: FNV-1a of its text (any index in range
/// loads; a node files the address by its own hash when it next adds it).
fn bucket_of(addr: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in addr.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn time_text(t: Option<SystemTime>) -> String {
    t.map_or(ZERO_TIME.to_string(), crate::wall_clock::rfc3339_ms)
}

/// RFC 3339 in UTC (`Z`), as Go writes it, to the second or finer; the
/// zero time and anything before 1970 as `None`.
fn parse_time(s: &str) -> Option<SystemTime> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|x| x.parse::<i64>());
    let (hh, mm, ss) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    if y < 1970 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's days_from_civil).
    let yy = if m <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    let nanos: u32 = format!("{frac:0<9}").get(..9)?.parse().ok()?;
    Some(UNIX_EPOCH + Duration::new(u64::try_from(secs).ok()?, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use p2p_conn::Identity;

    #[test]
    fn a_book_reads_back_what_was_written() {
        let t = UNIX_EPOCH + Duration::from_millis(1_780_000_000_123);
        let entries = vec![
            BookEntry {
                id: Identity::generate().node_id(),
                addr: "1.2.3.4:26656".parse().unwrap(),
                good: true,
                attempts: 0,
                last_attempt: Some(t),
                last_success: Some(t),
            },
            BookEntry {
                id: Identity::generate().node_id(),
                addr: "[2001:db8::1]:26656".parse().unwrap(),
                good: false,
                attempts: 2,
                last_attempt: Some(t),
                last_success: None,
            },
        ];
        let v = to_json(&"ab".repeat(24), &entries);
        assert_eq!(v["addrs"][0]["bucket_type"], 2);
        assert!(v["addrs"][0]["buckets"][0].as_u64().unwrap() < 64);
        assert!(v["addrs"][1]["buckets"][0].as_u64().unwrap() < 256);
        assert_eq!(v["addrs"][1]["last_success"], ZERO_TIME);
        let (key, back, skipped) = from_json(&v.to_string()).unwrap();
        assert_eq!((key.as_str(), skipped), ("ab".repeat(24).as_str(), 0));
        assert_eq!(back, entries);
        // Go's own form: nanoseconds, and the zero time.
        assert_eq!(
            parse_time("2026-12-04T22:23:55.123456789Z"),
            Some(UNIX_EPOCH + Duration::new(1_796_423_035, 123_456_789))
        );
        assert_eq!(parse_time(ZERO_TIME), None);
        assert_eq!(
            parse_time("2026-12-04T22:23:55Z")
                .map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs()),
            Some(1_796_423_035)
        );
        assert!(from_json("{}").is_err());
    }
}
