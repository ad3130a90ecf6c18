#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| p2p_conn_fuzz_checks::noise::check(data));
