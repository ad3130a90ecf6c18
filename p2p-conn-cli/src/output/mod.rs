//! How the commands print: plain-text tables ([`columns`]), the text of
//! SVG pictures ([`svg`]), and counts with their nouns ([`plural`]).

pub(crate) mod columns;
pub(crate) mod plural;
pub mod svg;
