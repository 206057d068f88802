//! `add` spec parsing: each malformed form gets its own message (snapshotted).

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use agentpack_lockfile::{parse_spec, PackageSpec, Pin};

#[test]
fn spec_errors() {
    let cases = [
        "",
        "github.com/acme",
        "gitlab.com/acme/x",
        "https://bitbucket.org/acme/x",
        "https://github.com/acme",
        "https://github.com/acme/x/tree",
        "https://github.com/acme/x/blob/main",
        "https://github.com/acme/x/issues/3",
        "git@github.com:acme/x.git",
        "acme/x/../y",
        "acme/x//y",
        "acme/x@",
        "acme/x@bad ref",
        "ac!me/x",
        "Local-Name",
        "@v1",
    ];
    let out: String = cases
        .iter()
        .map(|c| format!("{c:?}\n  {}\n", parse_spec(c).unwrap_err()))
        .collect();
    insta::assert_snapshot!("spec_errors", out);
}

#[test]
fn spec_to_manifest_entry() {
    let PackageSpec::Github(g) =
        parse_spec("github.com/acme/monorepo/packages/rules@v1.2.0").unwrap()
    else {
        panic!()
    };
    assert_eq!(
        Pin::from_reference(g.reference.as_deref()).unwrap(),
        Pin::Ref("v1.2.0".into())
    );
    let PackageSpec::Github(g) = parse_spec("acme/rules@^1.2").unwrap() else {
        panic!()
    };
    assert!(matches!(
        Pin::from_reference(g.reference.as_deref()).unwrap(),
        Pin::Version(_)
    ));
}
