//! `cycles` and `layout`: how the modules depend on each other, and how
//! the code is laid out in files (ARCHITECTURE.md).

use crate::ctx::Ctx;

pub fn cycles(ctx: &Ctx) -> Result<(), String> {
    ctx.run("python3", &["scripts/module-cycles.py"], &[])
}

pub fn layout(ctx: &Ctx) -> Result<(), String> {
    // The checks first prove on made-up trees that they pass and fail
    // where they should, then look at this one.
    ctx.run("python3", &["scripts/layout.py", "--self-test"], &[])?;
    ctx.run("python3", &["scripts/layout.py"], &[])
}
