//! One environment's definition: `agentpack.toml`, `pack.lock` and the optional `contract.json`,
//! read as regular files, validated, and published into the environments directory only when
//! complete.
//!
//! Publication: the files are written into a private temporary directory beside the destination,
//! validated there (manifest, lock, contract parse), then renamed into place, so a reader never
//! sees half an environment. A destination that exists is refused unless it is an empty directory
//! (which keeps its identity: the validated files are added to it without overwriting anything,
//! and removed again if one fails). Never writes outside the environments directory.

use std::path::{Component, Path, PathBuf};

use agentpack_lockfile::edit::ManifestDocument;
use agentpack_lockfile::manifest::Dependency;
use agentpack_lockfile::{Lockfile, Manifest};
use anyhow::{bail, Context as _, Result};

use crate::context::{LOCK_FILE, MANIFEST_FILE};

/// The optional contract's file name.
pub use agentpack_builders::contract::CONTRACT_FILE;

/// The largest definition file accepted (the docs' import limit, applied to every copy).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of one definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionFiles {
    pub manifest: Vec<u8>,
    pub lock: Option<Vec<u8>>,
    pub contract: Option<Vec<u8>>,
}

impl DefinitionFiles {
    /// Reads the definition in `dir`: regular files only (a symbolic link is refused), each at most
    /// [`MAX_FILE_BYTES`]; the manifest is required.
    pub fn read(dir: &Path) -> Result<Self> {
        let manifest = read_definition_file(dir, MANIFEST_FILE)?.with_context(|| {
            format!(
                "no {MANIFEST_FILE} in {}\n  fix  pass the directory of an agentpack project",
                dir.display()
            )
        })?;
        Ok(Self {
            manifest,
            lock: read_definition_file(dir, LOCK_FILE)?,
            contract: read_definition_file(dir, CONTRACT_FILE)?,
        })
    }

    /// The files by name, in the order they are written and listed.
    pub fn named(&self) -> Vec<(&'static str, &[u8])> {
        let mut files = vec![(MANIFEST_FILE, self.manifest.as_slice())];
        if let Some(lock) = &self.lock {
            files.push((LOCK_FILE, lock.as_slice()));
        }
        if let Some(contract) = &self.contract {
            files.push((CONTRACT_FILE, contract.as_slice()));
        }
        files
    }

    /// Writes every file into `dir`, never replacing one; on a failure the files this call wrote
    /// are removed again.
    fn write_new_into(&self, dir: &Path) -> Result<()> {
        let mut written = Vec::new();
        // Flushed file by file; the directory is renamed into place afterwards.
        let options =
            agentpack_fs::WriteOptions::shared_file().durability(agentpack_fs::Durability::File);
        for (name, bytes) in self.named() {
            let path = dir.join(name);
            if let Err(err) = agentpack_fs::write_new_file(&path, bytes, &options) {
                for path in &written {
                    let _ = fs_err::remove_file(path);
                }
                return Err(anyhow::Error::new(err).context(format!(
                    "cannot write {}; nothing was left behind",
                    path.display()
                )));
            }
            written.push(path);
        }
        Ok(())
    }
}

/// Reads `dir/name` if it exists: a regular file of at most [`MAX_FILE_BYTES`].
fn read_definition_file(dir: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    let path = dir.join(name);
    let meta = match fs_err::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    if meta.file_type().is_symlink() {
        bail!(
            "{} is a symbolic link; definition files must be regular files\n  fix  replace the link with a copy of the file it points to",
            path.display()
        );
    }
    if !meta.is_file() {
        bail!(
            "{} is not a regular file\n  fix  make it the file {name}",
            path.display()
        );
    }
    if meta.len() > MAX_FILE_BYTES {
        bail!(
            "{} is {} bytes, over the {MAX_FILE_BYTES}-byte limit of a definition file",
            path.display(),
            meta.len()
        );
    }
    Ok(Some(fs_err::read(&path)?))
}

/// Checks the definition in `dir` as a command will read it: the manifest and the lock parse and
/// validate, the contract validates. Returns the manifest and the lock.
pub fn validate_dir(dir: &Path) -> Result<(Manifest, Option<Lockfile>)> {
    let manifest = Manifest::load(&dir.join(MANIFEST_FILE))?;
    let lock = Lockfile::load_if_exists(&dir.join(LOCK_FILE))?;
    let contract = dir.join(CONTRACT_FILE);
    if let Some(bytes) = read_definition_file(dir, CONTRACT_FILE)? {
        check_contract(&bytes, &contract)?;
    }
    Ok((manifest, lock))
}

/// A contract validates as `preflight` reads it ([`agentpack_builders::contract::parse`]): a
/// bundle or a definition with a contract preflight would refuse is refused here too.
pub fn check_contract(bytes: &[u8], path: &Path) -> Result<()> {
    match agentpack_builders::contract::parse(bytes) {
        Ok(_) => Ok(()),
        Err(err) => bail!(
            "{} is not a valid contract: {err}\n  fix  correct that entry (docs/src/preflight.md has the schema), or remove it",
            path.display()
        ),
    }
}

/// A relative path dependency rewritten to the absolute directory it named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebased {
    pub module: String,
    pub from: String,
    pub to: String,
}

/// Rewrites every relative `{ path = ... }` dependency of the manifest to the absolute directory it
/// names from `source_dir`, and the lock's `path:` entries with it, so the copy reads the same
/// package wherever it lives. The manifest keeps its formatting; the lock is written canonically
/// only when it changes.
pub fn rebase_path_dependencies(
    files: &mut DefinitionFiles,
    source_dir: &Path,
) -> Result<Vec<Rebased>> {
    let manifest_path = source_dir.join(MANIFEST_FILE);
    let text = std::str::from_utf8(&files.manifest)
        .with_context(|| format!("{} is not UTF-8", manifest_path.display()))?;
    let manifest = Manifest::parse(text, &manifest_path)?;
    let mut document = ManifestDocument::parse(text, &manifest_path)?;
    let mut rebased = Vec::new();
    for (module, dependency) in &manifest.dependencies {
        let Dependency::Path(dir) = dependency else {
            continue;
        };
        if Path::new(dir).is_absolute() {
            continue;
        }
        let joined = source_dir.join(dir);
        let absolute = fs_err::canonicalize(&joined).unwrap_or_else(|_| normalize(&joined));
        let Some(to) = absolute.to_str() else {
            bail!(
                "the path dependency {module} ({dir}) resolves to a path that is not UTF-8: {}",
                absolute.display()
            );
        };
        document.set_dependency(module, &Dependency::Path(to.to_owned()))?;
        rebased.push(Rebased {
            module: module.as_str().to_owned(),
            from: dir.clone(),
            to: to.to_owned(),
        });
    }
    if rebased.is_empty() {
        return Ok(rebased);
    }
    document.to_manifest()?;
    files.manifest = document.to_string().into_bytes();
    if let Some(lock_bytes) = &files.lock {
        let lock_path = source_dir.join(LOCK_FILE);
        let text = std::str::from_utf8(lock_bytes)
            .with_context(|| format!("{} is not UTF-8", lock_path.display()))?;
        let mut lock = Lockfile::parse(text, &lock_path)?;
        let mut changed = false;
        for package in &mut lock.packages {
            if let Some(entry) = rebased
                .iter()
                .find(|r| package.url == format!("path:{}", r.from))
            {
                package.url = format!("path:{}", entry.to);
                changed = true;
            }
        }
        if changed {
            files.lock = Some(lock.to_toml_string().into_bytes());
        }
    }
    Ok(rebased)
}

/// `a/./b/../c` as `a/c`, without touching the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Publishes `files` as the environment `dir` (inside `environments_dir`), validated first in a
/// private temporary directory there. Refuses a destination that exists, unless it is an empty
/// directory and `allow_empty_destination`.
pub fn publish(
    environments_dir: &Path,
    dir: &Path,
    files: &DefinitionFiles,
    allow_empty_destination: bool,
) -> Result<()> {
    let destination_state = destination_state(dir, allow_empty_destination)?;
    fs_err::create_dir_all(environments_dir)?;
    let staging = tempfile::Builder::new()
        .prefix(".incoming-")
        .tempdir_in(environments_dir)
        .with_context(|| {
            format!(
                "cannot create a private directory in {}",
                environments_dir.display()
            )
        })?;
    files.write_new_into(staging.path())?;
    validate_dir(staging.path())?;
    match destination_state {
        Destination::Absent => {
            // Renaming a directory fails when the destination gained content meanwhile.
            fs_err::rename(staging.path(), dir).with_context(|| {
                format!(
                    "cannot publish the environment at {}\n  fix  make sure nothing else creates it at the same time, then run the command again",
                    dir.display()
                )
            })?;
            // Already moved: nothing is left for the guard to remove.
            let _ = staging.keep();
        }
        Destination::EmptyDir => files.write_new_into(dir)?,
    }
    Ok(())
}

/// What is at a destination that may be published to.
pub enum Destination {
    Absent,
    EmptyDir,
}

/// Whether the destination is absent or an empty directory; an error naming it otherwise.
pub fn destination_state(dir: &Path, allow_empty: bool) -> Result<Destination> {
    let meta = match fs_err::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Destination::Absent),
        Err(err) => return Err(err.into()),
    };
    if allow_empty && meta.is_dir() && fs_err::read_dir(dir)?.next().is_none() {
        return Ok(Destination::EmptyDir);
    }
    if allow_empty {
        bail!(
            "{} already exists and is not an empty directory; nothing was written\n  fix  pick another name, or remove it first",
            dir.display()
        );
    }
    bail!(
        "{} already exists; nothing was written\n  fix  pick another name with --name, or remove it first",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::normalize;
    use std::path::Path;

    #[test]
    fn normalize_drops_dot_and_dot_dot() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
    }
}
