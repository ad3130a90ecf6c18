//! How the commands print: plain-text tables ([`columns`]) and the text of
//! SVG pictures ([`svg`]).

pub(crate) mod columns;
pub mod svg;
