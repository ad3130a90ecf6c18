//! MConnection core tests: see below.
