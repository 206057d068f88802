//! Fuzz `add` spec parsing, module IDs, selectors and version constraints: no input may panic,
//! and what they accept renders back to something they accept again.
#![no_main]

use agentpack_lockfile::{classify_ref, parse_spec, ModuleId, PackageSpec, Selector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(PackageSpec::Github(spec)) = parse_spec(text) {
        let again = ModuleId::parse(spec.module.as_str()).expect("a spec's module ID is valid");
        assert_eq!(again, spec.module);
        let g = spec.module.as_github().expect("github module");
        assert_eq!(
            (g.owner, g.repo, g.path),
            (spec.owner.as_str(), spec.repo.as_str(), spec.path.as_str())
        );
    }
    if let Ok(module) = ModuleId::parse(text) {
        assert_eq!(module.as_str(), text);
    }
    if let Ok(selector) = Selector::parse(text) {
        assert_eq!(selector.to_string(), text);
    }
    let _ = classify_ref(text);
});
