//! Byte-stream checks with short diagnostics, for what a peer printed or
//! received.

/// Check `got` byte for byte, naming the first bad offset and the 16 bytes
/// from there on each side (without dumping megabytes).
pub fn check_bytes(what: &str, got: &[u8], expected: &[u8]) {
    check_bytes_at(what, got, expected, |_| String::new());
}

/// [`check_bytes`], with `place(offset)` added after the first bad offset
/// (e.g. ` (message 3, offset 17)`).
pub fn check_bytes_at(
    what: &str,
    got: &[u8],
    expected: &[u8],
    place: impl FnOnce(usize) -> String,
) {
    if got == expected {
        return;
    }
    let at = got
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(expected.len()));
    let show = |b: &[u8]| format!("{:02x?}", &b[at.min(b.len())..(at + 16).min(b.len())]);
    panic!(
        "{what}: got {} bytes, expected {}; first difference at byte {at}{}: got {} expected {}",
        got.len(),
        expected.len(),
        place(at),
        show(got),
        show(expected),
    );
}
