//! Fuzz the agentpack.toml parser and the edit layer: no input may panic; a manifest that parses
//! also opens for editing, and an untouched edit document gives back the input text (when it ends
//! with a newline).
#![no_main]

use std::path::Path;

use agentpack_lockfile::{Manifest, ManifestDocument};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("agentpack.toml");
    if let Ok(manifest) = Manifest::parse(text, path) {
        let doc =
            ManifestDocument::parse(text, path).expect("a valid manifest must open for editing");
        // toml_edit ends a trailing table header with a newline; everything else is kept.
        if text.ends_with('\n') {
            assert_eq!(doc.to_string(), text);
        }
        assert_eq!(doc.to_manifest().expect("re-parse"), manifest);
    }
});
