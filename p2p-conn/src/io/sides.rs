//! The second type parameter of `SecretStream`: public, sealed markers over
//! the crate's engines (see [`Sides`]).

use crate::engine::{Duplex, FrameReader, FrameWriter};

/// Which sides of a connection a [`SecretStream`](super::SecretStream)
/// holds: the second type parameter of every connection type. Sealed.
///
/// A whole connection holds both sides ([`Whole`]); a read half holds the
/// receive side ([`ReadSide`]) and a write half the send side
/// ([`WriteSide`]). The adapters' aliases (`tokio::SecretConnection<T>`,
/// `blocking::ReadHalf`, …) fill it in, so most code never writes it. Code
/// generic over a connection and its halves bounds on [`Sides`], on
/// [`Reads`] (a whole connection or a read half) or on [`Writes`] (a whole
/// connection or a write half):
///
/// ```
/// use std::io::{self, Read};
///
/// use p2p_conn::io::{blocking::Blocking, Reads, SecretStream};
///
/// /// A 4-byte big-endian length and that many bytes, from a whole
/// /// connection or a read half.
/// fn read_record<T: Read, S: Reads>(
///     conn: &mut SecretStream<T, S, Blocking>,
/// ) -> io::Result<Vec<u8>> {
///     let mut len = [0u8; 4];
///     conn.read_exact(&mut len)?;
///     let mut record = vec![0; u32::from_be_bytes(len) as usize];
///     conn.read_exact(&mut record)?;
///     Ok(record)
/// }
/// ```
///
/// # Guarantees
/// The markers are uninhabited and the traits are sealed: they name a
/// stream's shape and nothing else, and no type outside this crate can
/// implement them, so new sides can be added without breaking a bound.
///
/// # Not provided
/// No access to the engines behind a side (the buffers, the sealer and the
/// opener): those are the crate's own.
pub trait Sides: sealed::Sealed {}

/// Sides with a receive side: [`Whole`] and [`ReadSide`]. Sealed.
pub trait Reads: Sides + sealed::ReadsSealed {}

/// Sides with a send side: [`Whole`] and [`WriteSide`]. Sealed.
pub trait Writes: Sides + sealed::WritesSealed {}

/// Both sides: a whole connection.
#[derive(Debug)]
pub enum Whole {}

/// The receive side only: a read half.
#[derive(Debug)]
pub enum ReadSide {}

/// The send side only: a write half.
#[derive(Debug)]
pub enum WriteSide {}

pub(crate) mod sealed {
    use crate::engine::{Engines, HasReader, HasWriter};

    /// What a side holds: the engines it drives.
    pub trait Sealed {
        type Engines: Engines;
    }
    pub trait ReadsSealed: Sealed<Engines: HasReader> {}
    pub trait WritesSealed: Sealed<Engines: HasWriter> {}
}

impl sealed::Sealed for Whole {
    type Engines = Duplex;
}
impl sealed::Sealed for ReadSide {
    type Engines = FrameReader;
}
impl sealed::Sealed for WriteSide {
    type Engines = FrameWriter;
}

impl Sides for Whole {}
impl Sides for ReadSide {}
impl Sides for WriteSide {}
impl sealed::ReadsSealed for Whole {}
impl sealed::ReadsSealed for ReadSide {}
impl sealed::WritesSealed for Whole {}
impl sealed::WritesSealed for WriteSide {}
impl Reads for Whole {}
impl Reads for ReadSide {}
impl Writes for Whole {}
impl Writes for WriteSide {}
