//! Fuzz the pack.lock reader: no input may panic; any lock that loads writes to canonical text
//! that loads to the same lock and writes to the same bytes.
#![no_main]

use std::path::Path;

use agentpack_lockfile::Lockfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("pack.lock");
    if let Ok(mut lock) = Lockfile::parse(text, path) {
        let written = lock.to_toml_string();
        let back = Lockfile::parse(&written, path).expect("canonical text must load");
        lock.sort();
        assert_eq!(back, lock);
        assert_eq!(back.to_toml_string(), written);
    }
});
