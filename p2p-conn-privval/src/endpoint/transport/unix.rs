//! `unix://PATH`: a plaintext Unix socket, as CometBFT does (nothing to
//! authenticate: whoever can open the path is trusted).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};

use super::{connecting, within, Setup};
use crate::endpoint::stream::Conn;
use crate::endpoint::{Address, AddressError, EndpointError};

/// The part after `unix://` of `whole`.
pub(super) fn parse(whole: &str, path: &str) -> Result<Address, AddressError> {
    if path.is_empty() {
        return Err(AddressError::Empty(whole.into()));
    }
    Ok(Address::Unix(path.into()))
}

/// Connect to the socket at `path`.
pub(super) async fn dial(
    path: &Path,
    setup: &Setup<'_>,
    connect_timeout: Duration,
) -> Result<Conn, EndpointError> {
    let unix = connecting(connect_timeout, UnixStream::connect(path)).await?;
    Ok(Conn::plain(unix, setup.limit))
}

/// A listening socket; its file goes with it, as Go's does.
pub(crate) struct Listener {
    listener: UnixListener,
    path: PathBuf,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Listener {
    /// Listen at `path`, which must not exist yet.
    pub(super) fn bind(path: &Path) -> std::io::Result<Listener> {
        Ok(Listener {
            listener: UnixListener::bind(path)?,
            path: path.to_path_buf(),
        })
    }

    pub(super) async fn accept(
        &self,
        setup: &Setup<'_>,
        accept_timeout: Duration,
    ) -> Result<Conn, EndpointError> {
        let (unix, _) = within(accept_timeout, self.listener.accept()).await?;
        Ok(Conn::plain(unix, setup.limit))
    }

    pub(super) fn address(&self) -> Address {
        Address::Unix(self.path.clone())
    }
}
