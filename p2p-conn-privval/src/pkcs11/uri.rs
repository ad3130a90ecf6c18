//! [`Pkcs11Uri`]: the RFC 7512 URI that names a key in a PKCS#11 token.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::SignerError;

/// A validator key in a PKCS#11 token, named by an RFC 7512 URI:
///
/// ```text
/// pkcs11:token=LABEL;object=LABEL?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/p2p-conn/pin
/// ```
///
/// - The token: `token=` (its label), `serial=`, or `slot-id=` (a
///   decimal slot number); with none, the one slot that has a token.
/// - The key: `object=` (its label) and/or `id=` (its `CKA_ID`,
///   percent-encoded bytes, e.g. `id=%01`). `type=` may be `private`.
/// - `module-path=`: the PKCS#11 module (required).
/// - `pin-source=file:PATH` (or a bare absolute `PATH`): the file holding
///   the user PIN (trailing newline ignored). Without it the token is not
///   logged in to.
/// - `x-pub-key=BASE64`: the Ed25519 public key the operator expects (as
///   `cometbft show-validator` prints its `value`); the token's must be it.
///
/// `pin-value=` is refused: a PIN in the URI sits on the command line or in
/// a config file, where every user of the machine can read it
/// (`/proc/PID/cmdline`). An attribute this signer does not know, or given
/// twice, is refused rather than ignored: a typo would name another key.
/// Values are percent-decoded.
#[derive(Clone, PartialEq, Eq)]
pub struct Pkcs11Uri {
    text: String,
    pub(super) token: Option<String>,
    pub(super) serial: Option<String>,
    pub(super) slot_id: Option<u64>,
    pub(super) object: Option<String>,
    pub(super) id: Option<Vec<u8>>,
    pub(super) module_path: PathBuf,
    pub(super) pin_file: Option<PathBuf>,
    pub(super) pub_key: Option<[u8; 32]>,
}

impl Pkcs11Uri {
    /// The file `pin-source` names, whose permissions the caller may check
    /// (the PIN is read from it when the key is opened).
    pub fn pin_file(&self) -> Option<&Path> {
        self.pin_file.as_deref()
    }

    /// The URI's path part (`pkcs11:token=...;object=...`): the token and
    /// the object, for messages.
    pub(super) fn name(&self) -> &str {
        self.text.split('?').next().unwrap_or(&self.text)
    }
}

impl std::fmt::Display for Pkcs11Uri {
    /// The URI as given (it holds no PIN: `pin-value` is refused).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::fmt::Debug for Pkcs11Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pkcs11Uri").field(&self.text).finish()
    }
}

fn bad(msg: impl Into<String>) -> SignerError {
    SignerError::KeyUri(msg.into())
}

/// `%XX` escapes decoded; anything else as is.
fn percent_decode(name: &str, value: &str) -> Result<Vec<u8>, SignerError> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad(format!("{name}: a % not followed by two hex digits")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn text(name: &str, value: &str) -> Result<String, SignerError> {
    String::from_utf8(percent_decode(name, value)?)
        .map_err(|_| bad(format!("{name} is not UTF-8 once percent-decoded")))
}

fn set<T>(slot: &mut Option<T>, name: &str, value: T) -> Result<(), SignerError> {
    if slot.replace(value).is_some() {
        return Err(bad(format!("{name} is given twice")));
    }
    Ok(())
}

impl FromStr for Pkcs11Uri {
    type Err = SignerError;

    fn from_str(s: &str) -> Result<Self, SignerError> {
        let rest = s
            .strip_prefix("pkcs11:")
            .ok_or_else(|| bad("a PKCS#11 URI starts with pkcs11:"))?;
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, q),
            None => (rest, ""),
        };
        let mut token = None;
        let mut serial = None;
        let mut slot_id = None;
        let mut object = None;
        let mut id = None;
        let mut kind = None;
        for attr in path.split(';').filter(|a| !a.is_empty()) {
            let (name, value) = attr
                .split_once('=')
                .ok_or_else(|| bad(format!("{attr:?} is not NAME=VALUE")))?;
            match name {
                "token" => set(&mut token, name, text(name, value)?)?,
                "serial" => set(&mut serial, name, text(name, value)?)?,
                "object" => set(&mut object, name, text(name, value)?)?,
                "id" => set(&mut id, name, percent_decode(name, value)?)?,
                "slot-id" => {
                    let n = value
                        .parse::<u64>()
                        .map_err(|_| bad(format!("slot-id {value:?} is not a decimal number")))?;
                    set(&mut slot_id, name, n)?
                }
                "type" => set(&mut kind, name, text(name, value)?)?,
                _ => {
                    return Err(bad(format!(
                        "path attribute {name:?} is not one p2p-conn reads (token, serial, \
                         slot-id, object, id, type)"
                    )))
                }
            }
        }
        if let Some(kind) = kind.filter(|k| k != "private") {
            return Err(bad(format!(
                "type={kind}: the signer opens the private key (type=private, or leave it out)"
            )));
        }
        if object.is_none() && id.is_none() {
            return Err(bad("name the key with object=LABEL or id=BYTES"));
        }
        let mut module_path = None;
        let mut pin_file = None;
        let mut pub_key = None;
        for attr in query.split('&').filter(|a| !a.is_empty()) {
            let (name, value) = attr
                .split_once('=')
                .ok_or_else(|| bad(format!("{attr:?} is not NAME=VALUE")))?;
            match name {
                "module-path" => set(&mut module_path, name, PathBuf::from(text(name, value)?))?,
                "pin-source" => {
                    let source = text(name, value)?;
                    let file = source
                        .strip_prefix("file://")
                        .or_else(|| source.strip_prefix("file:"))
                        .unwrap_or(&source);
                    if !file.starts_with('/') {
                        return Err(bad(format!(
                            "pin-source {source:?}: give the PIN file's absolute path, \
                             pin-source=file:/PATH"
                        )));
                    }
                    set(&mut pin_file, name, PathBuf::from(file))?
                }
                "pin-value" => {
                    return Err(bad(
                        "pin-value is refused: a PIN in the URI is on the command line or in \
                         the config, where every user of the machine can read it \
                         (/proc/PID/cmdline); put it in a file of mode 600 and name it with \
                         pin-source=file:/PATH",
                    ))
                }
                "x-pub-key" => {
                    use base64::Engine;
                    let b64 = text(name, value)?;
                    let key: [u8; 32] = base64::engine::general_purpose::STANDARD
                        .decode(b64.trim())
                        .ok()
                        .and_then(|k| k.try_into().ok())
                        .ok_or_else(|| {
                            bad("x-pub-key is not a base64 Ed25519 public key (32 bytes)")
                        })?;
                    set(&mut pub_key, name, key)?
                }
                "module-name" => {
                    return Err(bad(
                        "module-name is not read: give the module's file with module-path=/PATH",
                    ))
                }
                _ => {
                    return Err(bad(format!(
                        "query attribute {name:?} is not one p2p-conn reads (module-path, \
                         pin-source, x-pub-key)"
                    )))
                }
            }
        }
        let module_path = module_path.ok_or_else(|| {
            bad("module-path is required: the PKCS#11 module's file, e.g. \
                 ?module-path=/usr/lib/softhsm/libsofthsm2.so")
        })?;
        Ok(Pkcs11Uri {
            text: s.to_owned(),
            token,
            serial,
            slot_id,
            object,
            id,
            module_path,
            pin_file,
            pub_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "module-path=/usr/lib/softhsm/libsofthsm2.so";

    fn parse(s: &str) -> Result<Pkcs11Uri, String> {
        s.parse::<Pkcs11Uri>().map_err(|e| e.to_string())
    }

    #[test]
    fn reads_token_object_module_and_pin_file() {
        let uri = parse(&format!(
            "pkcs11:token=val%20idator;object=key?{MODULE}&pin-source=file:/etc/p2p-conn/pin"
        ))
        .unwrap();
        assert_eq!(uri.token.as_deref(), Some("val idator"));
        assert_eq!(uri.object.as_deref(), Some("key"));
        assert_eq!(
            uri.module_path,
            Path::new("/usr/lib/softhsm/libsofthsm2.so")
        );
        assert_eq!(uri.pin_file(), Some(Path::new("/etc/p2p-conn/pin")));
        assert_eq!(uri.name(), "pkcs11:token=val%20idator;object=key");
        let uri = parse(&format!("pkcs11:slot-id=7;id=%01%ff;type=private?{MODULE}")).unwrap();
        assert_eq!(uri.slot_id, Some(7));
        assert_eq!(uri.id.as_deref(), Some(&[1u8, 0xff][..]));
        assert_eq!(uri.pin_file(), None);
        let uri = parse(&format!("pkcs11:object=k?{MODULE}&pin-source=/run/pin")).unwrap();
        assert_eq!(uri.pin_file(), Some(Path::new("/run/pin")));
    }

    #[test]
    fn refuses_what_it_cannot_trust() {
        for (uri, words) in [
            ("token=a;object=b?module-path=/m", "starts with pkcs11:"),
            ("pkcs11:token=a;object=b", "module-path is required"),
            ("pkcs11:token=a?module-path=/m", "object=LABEL or id=BYTES"),
            (
                "pkcs11:object=b?module-path=/m&pin-value=1234",
                "every user of the machine",
            ),
            (
                "pkcs11:object=b;object=c?module-path=/m",
                "object is given twice",
            ),
            ("pkcs11:objekt=b?module-path=/m", "\"objekt\" is not one"),
            ("pkcs11:object=b;type=public?module-path=/m", "type=public"),
            ("pkcs11:object=b;id=%0?module-path=/m", "two hex digits"),
            ("pkcs11:object=b;slot-id=x?module-path=/m", "not a decimal"),
            (
                "pkcs11:object=b?module-path=/m&pin-source=pin",
                "absolute path",
            ),
            ("pkcs11:object=b?module-path=/m&x-pub-key=AAAA", "32 bytes"),
        ] {
            let err = parse(uri).expect_err(uri);
            assert!(err.contains(words), "{uri}: {err}");
            assert!(!err.contains("1234"), "the PIN is never repeated: {err}");
        }
    }
}
