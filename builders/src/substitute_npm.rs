//! npm MCP server trees from substituters, verifiably: a cache holds the **tarballs** a tree's lock
//! records pin, never the unpacked tree.
//!
//! `pack.lock` binds an npm tree only through the SRI integrity of each record's tarball (the
//! `tree_digest` is a digest over the records, not over any bytes), and the unpacked tree depends
//! on the platform (optional packages of other platforms are left out). So the artifact
//! `agentpack store push` writes for a tree (tagged by `identity_tag(tree_digest)`, kind
//! [`crate::oci::ArtifactKind::NpmTree`]) holds one file per distinct tarball of the tree's records, every
//! platform's, named by its integrity ([`tarball_file_name`]: `sha512-<hex>.tgz`). A machine that
//! needs the tree pulls it through [`Substituters`], checks every tarball it needs on its platform
//! against the lock's integrity, and unpacks them itself exactly as it would unpack registry
//! downloads, so the tree store path is built locally and is the same one a registry download
//! gives.
//!
//! It must never hand out a tarball whose bytes differ from the lock's integrity: such a tarball is
//! dropped (one warning naming the package) and the caller downloads it from the npm registry, as
//! it does for a tarball the artifact does not hold. The first substituter that has the artifact
//! serves it (the next ones are asked only when it has none, cannot be reached, or sends something
//! that is not a tarball artifact). Never prints: warnings are returned.

// Errors carry the packages and causes a message needs; they are returned once per tree on a cold
// path, so their size does not matter.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agentpack_store::Store;

use crate::limits::Limits;
use crate::npm::exec_spec::{ExecSpec, ExecTreeEntry};
use crate::npm::integrity::{self, IntegrityMismatch};
use crate::npm::registry::{tarball_url, RegistryClient, RegistryError};
use crate::npm::tree::package_name_at;
use crate::substitute::{Substituters, Verified};

/// The suffix of a tarball file in an npm-tree artifact.
pub const TARBALL_SUFFIX: &str = ".tgz";

/// The file name a tarball has in an npm-tree artifact: `<algorithm>-<hex digest>.tgz` of the
/// strongest hash of its SRI integrity agentpack checks (sha512, sha384, sha256). `None` when the
/// integrity names none (such a tarball cannot be checked, so it is never cached).
pub fn tarball_file_name(integrity: &str) -> Option<String> {
    integrity::strongest_decoded(integrity)
        .map(|(algorithm, digest)| format!("{algorithm}-{}{TARBALL_SUFFIX}", hex::encode(digest)))
}

/// How messages name a tree: `the npm tree of @scope/server@1.2.0`.
pub fn describe_tree(spec: &ExecSpec) -> String {
    format!("the npm tree of {}@{}", spec.package, spec.version)
}

/// What the substituters supplied for one tree.
#[derive(Debug, Default)]
pub struct SubstitutedTarballs {
    /// Verified tarball bytes, by the lock's integrity string.
    pub tarballs: BTreeMap<String, Vec<u8>>,
    /// What served them (`oci://host/repo@sha256:...`), when a substituter did.
    pub served_by: Option<String>,
    /// At most one warning for the tree (tarballs refused or missing), plus the substituters' own.
    pub warnings: Vec<String>,
}

/// One tarball the artifact did not supply.
#[derive(Debug, Clone)]
struct Lacking {
    package: String,
    version: String,
    /// Why: `None` when the artifact has no such file.
    refused: Option<String>,
}

#[derive(Debug, Default)]
struct Checked {
    tarballs: BTreeMap<String, Vec<u8>>,
    lacking: Vec<Lacking>,
}

/// Checks the pulled files of an artifact against the records `wanted` needs (pure over `dir`).
fn check_pulled(dir: &Path, wanted: &[&ExecTreeEntry], limits: &Limits) -> Result<Checked, String> {
    let names: BTreeSet<String> = fs_err::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|entry| entry.ok()?.file_name().to_str().map(str::to_owned))
        .collect();
    if !names.iter().any(|name| name.ends_with(TARBALL_SUFFIX)) && names.contains("node_modules") {
        return Err(
            "it holds an unpacked npm tree (pushed by an earlier agentpack), not the tree's tarballs, so nothing could verify it against pack.lock".to_owned(),
        );
    }
    let mut checked = Checked::default();
    let mut seen = BTreeSet::new();
    for entry in wanted {
        if !seen.insert(entry.integrity.as_str()) {
            continue;
        }
        let package = package_name_at(&entry.path).to_owned();
        let lacking = |refused: Option<String>| Lacking {
            package: package.clone(),
            version: entry.version.clone(),
            refused,
        };
        let Some(name) = tarball_file_name(&entry.integrity).filter(|n| names.contains(n)) else {
            checked.lacking.push(lacking(None));
            continue;
        };
        let path = dir.join(&name);
        let size = fs_err::symlink_metadata(&path)
            .map(|m| m.len())
            .map_err(|e| e.to_string())?;
        if size > limits.max_download_bytes {
            checked.lacking.push(lacking(Some(format!(
                "its tarball is {size} bytes, more than {}",
                limits.describe(crate::limits::LimitKind::DownloadSize)
            ))));
            continue;
        }
        let bytes = fs_err::read(&path).map_err(|e| e.to_string())?;
        match integrity::check(&entry.integrity, &bytes) {
            Ok(()) => {
                checked.tarballs.insert(entry.integrity.clone(), bytes);
            }
            Err(IntegrityMismatch::Differs { actual, .. }) => {
                checked.lacking.push(lacking(Some(format!(
                    "its tarball hashes to {actual}, pack.lock says {}",
                    entry.integrity
                ))));
            }
            Err(error) => checked.lacking.push(lacking(Some(error.to_string()))),
        }
    }
    Ok(checked)
}

/// The one warning of a tree whose artifact lacked or refused tarballs.
fn lacking_warning(spec: &ExecSpec, served_by: &str, lacking: &[Lacking]) -> Option<String> {
    if lacking.is_empty() {
        return None;
    }
    let names = |list: &[&Lacking]| -> String {
        list.iter()
            .map(|l| format!("{}@{}", l.package, l.version))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let refused: Vec<&Lacking> = lacking.iter().filter(|l| l.refused.is_some()).collect();
    let missing: Vec<&Lacking> = lacking.iter().filter(|l| l.refused.is_none()).collect();
    let tree = describe_tree(spec);
    let mut text = if refused.is_empty() {
        let (it, s) = if missing.len() == 1 {
            ("it", "")
        } else {
            ("them", "s")
        };
        format!(
            "warning: substituter {served_by} has no tarball{s} of {} for {tree}; downloading {it} from the npm registry",
            names(&missing)
        )
    } else {
        let (it, s, does) = if refused.len() == 1 {
            ("it", "", "does")
        } else {
            ("them", "s", "do")
        };
        let mut text = format!(
            "warning: refused the tarball{s} of {} in {tree} from substituter {served_by}: {} {does} not match the integrity in pack.lock; nothing of {it} was unpacked, downloading {it} from the npm registry",
            names(&refused),
            if refused.len() == 1 { "it" } else { "they" },
        );
        for l in &refused {
            if let Some(reason) = &l.refused {
                text.push_str(&format!("\n  {}@{}  {reason}", l.package, l.version));
            }
        }
        if !missing.is_empty() {
            text.push_str(&format!(
                "\n  missing   {} (not in the artifact; from the npm registry too)",
                names(&missing)
            ));
        }
        text
    };
    text.push_str(
        "\n  fix       push the tree again from a machine with a good copy (`agentpack store push`), or drop the tag",
    );
    Some(text)
}

/// Asks `substituters` for the tarballs of `spec` that `wanted` (the records this platform
/// installs) needs; see the module docs. An empty result when there are no substituters, none has
/// the tree, or none could be used: the caller downloads everything from the npm registry.
pub fn tarballs_from_substituters(
    substituters: &Substituters,
    store: &Store,
    spec: &ExecSpec,
    wanted: &[&ExecTreeEntry],
    limits: &Limits,
) -> SubstitutedTarballs {
    let mut out = SubstitutedTarballs::default();
    if substituters.is_empty() || wanted.is_empty() {
        return out;
    }
    let scratch = match store.temp_dir() {
        Ok(scratch) => scratch,
        Err(error) => {
            out.warnings.push(format!(
                "warning: cannot ask the substituters for {}: {error}; using the npm registry",
                describe_tree(spec)
            ));
            return out;
        }
    };
    let dest = scratch.path().join("npm-tarballs");
    let checked: Mutex<Option<Checked>> = Mutex::new(None);
    let verify = |dir: &Path| -> Result<Verified, String> {
        let result = check_pulled(dir, wanted, limits)?;
        *checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(result);
        // Each tarball is verified on its own; the ones that do not match are dropped above and
        // downloaded from the registry, so the artifact as a whole is accepted.
        Ok(Verified::Matches)
    };
    let what = describe_tree(spec);
    let served = substituters.substitute(&what, &spec.tree_digest, &dest, &verify);
    out.warnings.extend(substituters.take_warnings());
    let Some(served) = served else {
        return out;
    };
    let checked = checked
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .unwrap_or_default();
    out.warnings
        .extend(lacking_warning(spec, &served.served_by, &checked.lacking));
    tracing::debug!(
        what = what.as_str(),
        source = served.served_by.as_str(),
        tarballs = checked.tarballs.len(),
        from_registry = checked.lacking.len(),
        "npm tarballs from a substituter"
    );
    out.tarballs = checked.tarballs;
    out.served_by = Some(served.served_by);
    out
}

/// Why the tarball directory of a tree could not be made for `store push`.
#[derive(Debug, thiserror::Error)]
pub enum NpmPushError {
    /// A tarball could not be downloaded.
    #[error("cannot download {package}@{version} of {tree}: {cause}\n  fix  check that the npm registry is reachable and push again")]
    Download {
        /// How the tree is named.
        tree: String,
        /// Package.
        package: String,
        /// Version.
        version: String,
        /// The cause.
        cause: RegistryError,
    },
    /// The registry served other bytes than the lock pins: nothing is pushed for this tree.
    #[error("the tarball of {package}@{version} ({url}) does not match the integrity in pack.lock: {cause}; {tree} was not pushed\n  fix  if the registry really changed this version, run `agentpack lock --update` and review the change")]
    Integrity {
        /// How the tree is named.
        tree: String,
        /// Package.
        package: String,
        /// Version.
        version: String,
        /// Where it came from.
        url: String,
        /// Expected and actual.
        cause: IntegrityMismatch,
    },
    /// A record's integrity uses no algorithm agentpack checks.
    #[error("{package}@{version} of {tree} has the integrity `{integrity}`, which agentpack cannot check; {tree} was not pushed")]
    Unsupported {
        /// How the tree is named.
        tree: String,
        /// Package.
        package: String,
        /// Version.
        version: String,
        /// The integrity.
        integrity: String,
    },
    /// A file could not be written.
    #[error("cannot write {}: {cause}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
}

/// What [`write_tarball_dir`] wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TarballDir {
    /// Tarball files written.
    pub tarballs: usize,
    /// Optional packages the registry had no tarball for (`name@version`), left out.
    pub skipped_optional: Vec<String>,
}

/// The layer of the npm-tree artifact of `spec`: every distinct tarball of its records (every
/// platform's), downloaded from the spec's registry, checked against its integrity, and written
/// into `dir` as [`tarball_file_name`]. An optional package the registry cannot serve is left out
/// (it may not exist for every platform); anything else that fails fails the tree.
pub fn write_tarball_dir(
    spec: &ExecSpec,
    client: &RegistryClient,
    dir: &Path,
) -> Result<TarballDir, NpmPushError> {
    let tree = describe_tree(spec);
    fs_err::create_dir_all(dir).map_err(|cause| NpmPushError::Io {
        path: dir.to_path_buf(),
        cause,
    })?;
    let mut seen = BTreeSet::new();
    let mut written = TarballDir::default();
    for entry in &spec.tree {
        if !seen.insert(entry.integrity.as_str()) {
            continue;
        }
        let package = package_name_at(&entry.path).to_owned();
        let Some(name) = tarball_file_name(&entry.integrity) else {
            return Err(NpmPushError::Unsupported {
                tree,
                package,
                version: entry.version.clone(),
                integrity: entry.integrity.clone(),
            });
        };
        let url = tarball_url(&spec.registry, &package, &entry.version);
        let bytes = match client.download(&url) {
            Ok(bytes) => bytes,
            Err(_) if entry.optional => {
                written
                    .skipped_optional
                    .push(format!("{package}@{}", entry.version));
                continue;
            }
            Err(source) => {
                return Err(NpmPushError::Download {
                    tree,
                    package,
                    version: entry.version.clone(),
                    cause: source,
                })
            }
        };
        integrity::check(&entry.integrity, &bytes).map_err(|cause| NpmPushError::Integrity {
            tree: tree.clone(),
            package: package.clone(),
            version: entry.version.clone(),
            url: url.clone(),
            cause,
        })?;
        let path = dir.join(&name);
        fs_err::write(&path, &bytes).map_err(|cause| NpmPushError::Io { path, cause })?;
        written.tarballs += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;

    fn entry(path: &str, version: &str, bytes: &[u8]) -> ExecTreeEntry {
        ExecTreeEntry {
            path: path.into(),
            version: version.into(),
            integrity: integrity::sha512_integrity(bytes),
            os: Vec::new(),
            cpu: Vec::new(),
            optional: false,
        }
    }

    #[test]
    fn file_names_follow_the_strongest_hash() {
        let integrity = integrity::sha512_integrity(b"abc");
        let name = tarball_file_name(&integrity).unwrap();
        assert!(
            name.starts_with("sha512-") && name.ends_with(".tgz"),
            "{name}"
        );
        assert_eq!(name.len(), "sha512-".len() + 128 + 4);
        assert_eq!(
            tarball_file_name(&format!("sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0= {integrity}")),
            Some(name)
        );
        assert_eq!(tarball_file_name("sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0="), None);
        assert_eq!(tarball_file_name("sha512-@@@"), None);
    }

    #[test]
    fn pulled_tarballs_are_kept_only_when_they_match_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let good = entry("node_modules/a", "1.0.0", b"tarball a");
        let bad = entry("node_modules/b", "2.0.0", b"tarball b");
        let gone = entry("node_modules/c", "3.0.0", b"tarball c");
        fs_err::write(
            dir.path().join(tarball_file_name(&good.integrity).unwrap()),
            b"tarball a",
        )
        .unwrap();
        fs_err::write(
            dir.path().join(tarball_file_name(&bad.integrity).unwrap()),
            b"other bytes",
        )
        .unwrap();
        let wanted = [&good, &bad, &gone];
        let checked = check_pulled(dir.path(), &wanted, &Limits::default()).unwrap();
        assert_eq!(
            checked.tarballs.keys().collect::<Vec<_>>(),
            [&good.integrity]
        );
        assert_eq!(checked.lacking.len(), 2);
        let spec = ExecSpec {
            format: 1,
            package: "srv".into(),
            version: "1.0.0".into(),
            bin: "cli.js".into(),
            registry: "http://127.0.0.1:9".into(),
            tree_digest: "sha256-npm-tree-v1:00".into(),
            tree: vec![good.clone(), bad.clone(), gone.clone()],
        };
        let warning = lacking_warning(&spec, "oci://h/r@sha256:1", &checked.lacking).unwrap();
        assert!(warning.contains("refused the tarball of b@2.0.0 in the npm tree of srv@1.0.0 from substituter oci://h/r@sha256:1"), "{warning}");
        assert!(warning.contains("missing   c@3.0.0"), "{warning}");
        assert!(
            warning.contains("downloading it from the npm registry"),
            "{warning}"
        );
        assert_eq!(warning.matches("warning:").count(), 1);

        let unpacked = tempfile::tempdir().unwrap();
        fs_err::create_dir(unpacked.path().join("node_modules")).unwrap();
        let error = check_pulled(unpacked.path(), &wanted, &Limits::default()).unwrap_err();
        assert!(error.contains("unpacked npm tree"), "{error}");
    }
}
