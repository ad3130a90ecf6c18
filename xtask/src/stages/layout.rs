//! `cycles`: how the modules depend on each other.

use crate::ctx::Ctx;

pub fn cycles(ctx: &Ctx) -> Result<(), String> {
    ctx.run("python3", &["scripts/module-cycles.py"], &[])
}
