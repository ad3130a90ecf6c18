//! A validator key in a PKCS#11 token (feature `pkcs11`): an HSM (YubiHSM 2,
//! Thales Luna, AWS CloudHSM...) or SoftHSM 2, through the `cryptoki`
//! binding. [`Pkcs11Key`] is a [`ValidatorKey`], so a
//! [`GuardedSigner`](crate::GuardedSigner) signs with it as with the soft
//! key; [`Pkcs11Uri`] names it (RFC 7512).
//!
//! # Design
//! - Opening: the module is loaded and initialised (a module another key
//!   of this process already initialised is used as it is), the token is
//!   found by label, serial or slot, a read-only session is opened and the
//!   user logged in with the PIN read from the `pin-source` file (kept in
//!   memory, zeroized on drop, for the logins after a dropped session).
//!   The private key is found by label and/or `CKA_ID` and must be
//!   `CKK_EC_EDWARDS` on edwards25519; the public key is the
//!   `CKA_EC_POINT` of the public key object of the same label and ID.
//!   One signature of a fixed message, verified with that public key,
//!   proves the two belong together; with `x-pub-key` the public key must
//!   also be the operator's.
//! - Signing: `C_Sign` with `CKM_EDDSA` (pure Ed25519, no parameters) on
//!   the private key's handle. The private key never leaves the token: no
//!   code path reads its `CKA_VALUE` or wraps it.
//! - A session that fails (`CKR_SESSION_HANDLE_INVALID`,
//!   `CKR_SESSION_CLOSED`, `CKR_DEVICE_REMOVED`, `CKR_TOKEN_NOT_PRESENT`,
//!   `CKR_DEVICE_ERROR`, `CKR_USER_NOT_LOGGED_IN`, a stale object handle
//!   ...) is dropped, and reopened at once for the same request: token
//!   found again, login, key found again, then the signature. If that
//!   fails too, the request fails ([`SignerError::Token`]) and the next
//!   request tries again: one reopening per request at most, never a loop.
//!   The guard's state is saved before any signature is released, as with
//!   every key.
//!
//! # Guarantees
//! - No error holds the PIN or key material: errors name the token and
//!   object (the URI without its query) and the PKCS#11 return value.
//!
//! # Not provided
//! - Key types other than Ed25519 (a `CKK_EC` key, secp256k1 or P-256,
//!   is refused with [`SignerError::KeyType`]), key generation or import
//!   (`softhsm2-util --import`, `pkcs11-tool`: docs/operator-manual.md).
//! - `module-name` lookup, `pin-value`, and a PIN pad (protected
//!   authentication path).

use std::io::Read;

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error, RvError};
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::RawAuthPin;

use crate::messages::{crypto_public_key, CryptoPublicKey};
use crate::{SignerError, ValidatorKey};

mod uri;

pub use uri::Pkcs11Uri;

/// The largest PIN file read: a PIN is a few bytes; a bigger file is the
/// wrong one.
const MAX_PIN_FILE_BYTES: u64 = 256;

/// What the key signs once at open to check that the public key object
/// belongs to the private key.
const CHECK_MESSAGE: &[u8] = b"p2p-conn: does this token's public key belong to its private key?";

/// edwards25519's `CKA_EC_PARAMS`: the OID 1.3.101.112 (RFC 8410), or the
/// curve's name as a PrintableString (PKCS#11 3.0).
const ED25519_PARAMS: [&[u8]; 2] = [&[0x06, 0x03, 0x2b, 0x65, 0x70], b"\x13\x0cedwards25519"];

/// An Ed25519 key in a PKCS#11 token (module docs): its session, reopened
/// when it fails, and the public key read at open.
pub struct Pkcs11Key {
    uri: Pkcs11Uri,
    ctx: Pkcs11,
    pin: Option<RawAuthPin>,
    public: [u8; 32],
    /// The open session and the private key's handle in it; `None` after a
    /// failure, until the next request reopens it.
    session: Option<(Session, ObjectHandle)>,
    /// The token refused the PIN at a login after a dropped session: no
    /// login is tried again (tokens lock a PIN after a few wrong tries).
    pin_refused: Option<String>,
}

impl std::fmt::Debug for Pkcs11Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs11Key")
            .field("key", &self.uri.name())
            .field("public_key", &hex::encode(self.public))
            .field("session_open", &self.session.is_some())
            .finish_non_exhaustive()
    }
}

/// The error a failed call gives, worded with the return value's name.
fn describe(error: &Error) -> String {
    match error {
        Error::Pkcs11(RvError::PinIncorrect, _) => "CKR_PIN_INCORRECT: the PIN is wrong".into(),
        Error::Pkcs11(rv, function) => format!("{function:?}: {rv:?}"),
        other => other.to_string(),
    }
}

/// Does `error` mean the session (or the token behind it) is gone, so that
/// a new session may succeed?
fn session_lost(error: &Error) -> bool {
    matches!(
        error,
        Error::Pkcs11(
            RvError::SessionHandleInvalid
                | RvError::SessionClosed
                | RvError::DeviceRemoved
                | RvError::TokenNotPresent
                | RvError::DeviceError
                | RvError::UserNotLoggedIn
                | RvError::KeyHandleInvalid
                | RvError::ObjectHandleInvalid
                | RvError::CryptokiNotInitialized,
            _
        )
    )
}

impl Pkcs11Key {
    /// Open the key `uri` names: module, token, login, the private key and
    /// its public key, checked as the module docs say.
    ///
    /// Errors: [`SignerError::PinFile`], [`SignerError::Token`] (the module
    /// does not load, no token or object matches, the PIN is wrong...),
    /// [`SignerError::KeyType`] (not Ed25519), and
    /// [`SignerError::PublicKeyMismatch`].
    pub fn open(uri: &Pkcs11Uri) -> Result<Pkcs11Key, SignerError> {
        let pin = match &uri.pin_file {
            Some(path) => Some(read_pin(path)?),
            None => None,
        };
        let fail = |action| {
            let key = uri.name().to_owned();
            move |e: Error| SignerError::Token {
                key,
                action,
                error: describe(&e),
            }
        };
        let ctx = Pkcs11::new(&uri.module_path).map_err(fail("loading the PKCS#11 module"))?;
        initialize(&ctx).map_err(fail("initialising the PKCS#11 module"))?;
        let mut key = Pkcs11Key {
            uri: uri.clone(),
            ctx,
            pin,
            public: [0; 32],
            session: None,
            pin_refused: None,
        };
        let (session, private) = key.connect()?;
        key.public = key.read_public(&session)?;
        let signature = session
            .sign(&eddsa(), private, CHECK_MESSAGE)
            .map_err(fail("a first signature"))?;
        let vk = ed25519_dalek::VerifyingKey::from_bytes(&key.public);
        let verified = <[u8; 64]>::try_from(signature.as_slice())
            .ok()
            .zip(vk.ok())
            .is_some_and(|(sig, vk)| {
                vk.verify_strict(CHECK_MESSAGE, &ed25519_dalek::Signature::from_bytes(&sig))
                    .is_ok()
            });
        if !verified {
            return Err(SignerError::PublicKeyMismatch {
                key: uri.name().to_owned(),
                what: format!(
                    "the public key object ({}) does not verify the private key's signature: \
                     they are not one key pair",
                    b64(&key.public)
                ),
            });
        }
        if let Some(expected) = uri.pub_key.filter(|e| *e != key.public) {
            return Err(SignerError::PublicKeyMismatch {
                key: uri.name().to_owned(),
                what: format!(
                    "the token's key is {}, x-pub-key expects {}",
                    b64(&key.public),
                    b64(&expected)
                ),
            });
        }
        key.session = Some((session, private));
        Ok(key)
    }

    fn token_error(&self, action: &'static str, e: &Error) -> SignerError {
        SignerError::Token {
            key: self.uri.name().to_owned(),
            action,
            error: describe(e),
        }
    }

    /// The slot of the one token the URI names.
    fn find_slot(&self) -> Result<Slot, SignerError> {
        let uri = &self.uri;
        let slots = match self.ctx.get_slots_with_token() {
            Err(Error::Pkcs11(RvError::CryptokiNotInitialized, _)) => {
                initialize(&self.ctx)
                    .map_err(|e| self.token_error("initialising the module", &e))?;
                self.ctx.get_slots_with_token()
            }
            other => other,
        }
        .map_err(|e| self.token_error("listing the slots", &e))?;
        let mut found = Vec::new();
        for slot in slots {
            if uri.slot_id.is_some_and(|id| id != slot.id()) {
                continue;
            }
            if uri.token.is_some() || uri.serial.is_some() {
                let info = self
                    .ctx
                    .get_token_info(slot)
                    .map_err(|e| self.token_error("reading the token's label", &e))?;
                if uri.token.as_deref().is_some_and(|t| t != info.label())
                    || uri
                        .serial
                        .as_deref()
                        .is_some_and(|s| s != info.serial_number())
                {
                    continue;
                }
            }
            found.push(slot);
        }
        match found[..] {
            [slot] => Ok(slot),
            [] => Err(SignerError::Token {
                key: uri.name().to_owned(),
                action: "finding the token",
                error: "no slot holds a token that matches".into(),
            }),
            _ => Err(SignerError::Token {
                key: uri.name().to_owned(),
                action: "finding the token",
                error: format!(
                    "{} tokens match: name one with token=, serial= or slot-id=",
                    found.len()
                ),
            }),
        }
    }

    /// Open a session, log in, and find the private key: the session and
    /// the key's handle.
    fn connect(&mut self) -> Result<(Session, ObjectHandle), SignerError> {
        if let Some(error) = &self.pin_refused {
            return Err(SignerError::Token {
                key: self.uri.name().to_owned(),
                action: "logging in again",
                error: format!(
                    "{error}, at an earlier login: not tried again, as a token locks its PIN \
                     after a few wrong tries; restart the signer with the right PIN"
                ),
            });
        }
        let slot = self.find_slot()?;
        let session = self
            .ctx
            .open_ro_session(slot)
            .map_err(|e| self.token_error("opening a session", &e))?;
        if let Some(pin) = &self.pin {
            match session.login_with_raw(UserType::User, pin) {
                Ok(()) | Err(Error::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
                Err(e) => {
                    if matches!(
                        e,
                        Error::Pkcs11(
                            RvError::PinIncorrect
                                | RvError::PinLocked
                                | RvError::PinExpired
                                | RvError::PinInvalid
                                | RvError::PinLenRange,
                            _
                        )
                    ) {
                        self.pin_refused = Some(describe(&e));
                    }
                    return Err(self.token_error("logging in", &e));
                }
            }
        }
        let private = self.find(&session, ObjectClass::PRIVATE_KEY)?;
        self.check_type(&session, private)?;
        Ok((session, private))
    }

    /// The one object of `class` with the URI's label and ID.
    fn find(&self, session: &Session, class: ObjectClass) -> Result<ObjectHandle, SignerError> {
        let mut template = vec![Attribute::Class(class)];
        if let Some(label) = &self.uri.object {
            template.push(Attribute::Label(label.as_bytes().to_vec()));
        }
        if let Some(id) = &self.uri.id {
            template.push(Attribute::Id(id.clone()));
        }
        let what = if class == ObjectClass::PRIVATE_KEY {
            "finding the private key"
        } else {
            "finding the public key"
        };
        let found = session
            .find_objects(&template)
            .map_err(|e| self.token_error(what, &e))?;
        match found[..] {
            [one] => Ok(one),
            [] => Err(SignerError::Token {
                key: self.uri.name().to_owned(),
                action: what,
                error: if class == ObjectClass::PRIVATE_KEY && self.pin.is_none() {
                    "no such object (private keys are visible only after login: \
                     is pin-source missing?)"
                        .into()
                } else {
                    "no such object".into()
                },
            }),
            _ => Err(SignerError::Token {
                key: self.uri.name().to_owned(),
                action: what,
                error: format!("{} objects match: add id= or object=", found.len()),
            }),
        }
    }

    /// The private key must be `CKK_EC_EDWARDS` on edwards25519.
    fn check_type(&self, session: &Session, private: ObjectHandle) -> Result<(), SignerError> {
        let attrs = session
            .get_attributes(private, &[AttributeType::KeyType, AttributeType::EcParams])
            .map_err(|e| self.token_error("reading the key's type", &e))?;
        let mut key_type = None;
        let mut params = None;
        for attr in attrs {
            match attr {
                Attribute::KeyType(t) => key_type = Some(t),
                Attribute::EcParams(p) => params = Some(p),
                _ => {}
            }
        }
        let refuse = |key_type: String| SignerError::KeyType {
            key: self.uri.name().to_owned(),
            key_type,
        };
        match key_type {
            Some(t) if t == KeyType::EC_EDWARDS => {}
            Some(t) => return Err(refuse(t.to_string())),
            None => return Err(refuse("unknown (no CKA_KEY_TYPE)".into())),
        }
        match params {
            Some(p) if ED25519_PARAMS.contains(&p.as_slice()) => Ok(()),
            Some(p) => Err(refuse(format!(
                "CKK_EC_EDWARDS on another curve than edwards25519 (CKA_EC_PARAMS {})",
                hex::encode(p)
            ))),
            // Some tokens leave a private key's parameters unreadable: the
            // public key's length and the check signature decide then.
            None => Ok(()),
        }
    }

    /// The `CKA_EC_POINT` of the public key object of the private key's
    /// label and ID: 32 bytes, bare or in a DER OCTET STRING.
    fn read_public(&self, session: &Session) -> Result<[u8; 32], SignerError> {
        let public = self.find(session, ObjectClass::PUBLIC_KEY)?;
        let attrs = session
            .get_attributes(public, &[AttributeType::EcPoint])
            .map_err(|e| self.token_error("reading the public key", &e))?;
        let point = attrs.into_iter().find_map(|a| match a {
            Attribute::EcPoint(p) => Some(p),
            _ => None,
        });
        let bytes = match point.as_deref() {
            Some([0x04, 0x20, rest @ ..]) if rest.len() == 32 => rest,
            Some(raw) if raw.len() == 32 => raw,
            _ => {
                return Err(SignerError::KeyType {
                    key: self.uri.name().to_owned(),
                    key_type: format!(
                        "a key whose CKA_EC_POINT is not a 32-byte Ed25519 point ({} bytes)",
                        point.map_or(0, |p| p.len())
                    ),
                })
            }
        };
        Ok(bytes.try_into().expect("32 bytes"))
    }
}

impl ValidatorKey for Pkcs11Key {
    fn public_key(&self) -> CryptoPublicKey {
        CryptoPublicKey {
            sum: Some(crypto_public_key::Key::Ed25519(self.public.to_vec())),
        }
    }

    /// Sign with `CKM_EDDSA`. A session found lost is reopened once for
    /// this request (module docs); the public key must not have changed.
    fn sign(&mut self, message: &[u8]) -> Result<Vec<u8>, SignerError> {
        let mut reopened = false;
        loop {
            let (session, private) = match self.session.take() {
                Some(open) => open,
                None => {
                    reopened = true;
                    self.connect()?
                }
            };
            match session.sign(&eddsa(), private, message) {
                Ok(signature) if signature.len() == 64 => {
                    self.session = Some((session, private));
                    return Ok(signature);
                }
                Ok(signature) => {
                    self.session = Some((session, private));
                    return Err(SignerError::Token {
                        key: self.uri.name().to_owned(),
                        action: "signing",
                        error: format!("the token returned {} bytes, not 64", signature.len()),
                    });
                }
                // The session is dropped (closing it fails quietly if the
                // token already closed it); reopen once for this request.
                Err(e) if session_lost(&e) && !reopened => {
                    drop(session);
                }
                Err(e) => {
                    if !session_lost(&e) {
                        self.session = Some((session, private));
                    }
                    return Err(self.token_error("signing", &e));
                }
            }
        }
    }
}

fn eddsa() -> Mechanism<'static> {
    Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure))
}

/// `C_Initialize` with OS locking, taking a module this process already
/// initialised (another key) as it is.
fn initialize(ctx: &Pkcs11) -> Result<(), Error> {
    match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The PIN in `path`, one trailing newline (`\n` or `\r\n`) dropped.
fn read_pin(path: &std::path::Path) -> Result<RawAuthPin, SignerError> {
    let fail = |source| SignerError::PinFile {
        path: path.to_path_buf(),
        source,
    };
    let mut pin = zeroize::Zeroizing::new(Vec::new());
    std::fs::File::open(path)
        .map_err(fail)?
        .take(MAX_PIN_FILE_BYTES + 1)
        .read_to_end(&mut pin)
        .map_err(fail)?;
    if pin.len() as u64 > MAX_PIN_FILE_BYTES {
        return Err(fail(std::io::Error::other(format!(
            "larger than {MAX_PIN_FILE_BYTES} bytes: not a PIN file"
        ))));
    }
    if pin.ends_with(b"\n") {
        pin.pop();
        if pin.ends_with(b"\r") {
            pin.pop();
        }
    }
    if pin.is_empty() {
        return Err(fail(std::io::Error::other("it is empty")));
    }
    Ok(RawAuthPin::new(Box::new(pin.to_vec())))
}

fn b64(key: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(key)
}
