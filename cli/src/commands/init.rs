//! `agentpack init`: write a minimal manifest and an empty lock, make sure `AGENTPACK_HOME` exists.
//!
//! Never clobbers: an existing `agentpack.toml` (or a `pack.lock` without one, which would be lost)
//! stops the command before anything is written. Both files are written to temp files first and moved
//! into place, the manifest with a no-clobber rename so a concurrent `init` cannot be overwritten.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};

use crate::args::InitArgs;
use crate::context::{Context, Home, LOCK_FILE, MANIFEST_FILE};
use crate::output;

pub fn run(ctx: &Context, args: &InitArgs) -> Result<ExitCode> {
    let root = ctx.init_root();
    if !root.is_dir() {
        bail!(
            "cannot initialize {}: it is not a directory",
            root.display()
        );
    }
    let manifest_path = root.join(MANIFEST_FILE);
    let lock_path = root.join(LOCK_FILE);
    if manifest_path.exists() {
        bail!(
            "{} already exists; init never overwrites a manifest\n  fix  edit it, or use `agentpack add` to declare dependencies",
            manifest_path.display()
        );
    }
    if lock_path.exists() {
        bail!(
            "{} already exists without an {MANIFEST_FILE}; init will not replace it\n  fix  move it away, or restore {MANIFEST_FILE} from version control",
            lock_path.display()
        );
    }

    let name = match &args.name {
        Some(name) => name.clone(),
        None => default_name(&root)?,
    };
    let manifest = agentpack_lockfile::render_init_manifest(&name, &args.version);
    // The text must read back as a manifest (a bad --name or --version is refused here).
    agentpack_lockfile::Manifest::parse(&manifest, &manifest_path).with_context(|| {
        format!(
            "nothing was written: --name {name:?} / --version {:?} do not make a valid manifest",
            args.version
        )
    })?;
    let lock =
        agentpack_lockfile::Lockfile::new(name.clone(), args.version.clone()).to_toml_string();

    let home = Home::from_env()?;
    home.ensure()?;

    // 0666 less the umask, like a plain `open`: these files are meant to be committed and shared.
    // Neither replaces a file that appeared meanwhile.
    let options = agentpack_fs::WriteOptions::shared_file()
        .durability(agentpack_fs::Durability::File)
        .temp(agentpack_fs::TempName::Prefix(".agentpack-init-"));
    agentpack_fs::write_new_file(&manifest_path, manifest.as_bytes(), &options)?;
    if let Err(err) = agentpack_fs::write_new_file(&lock_path, lock.as_bytes(), &options) {
        // Leave nothing half-done: the manifest we just created goes again.
        let _ = fs_err::remove_file(&manifest_path);
        return Err(err.into());
    }

    if ctx.says() {
        output::stdout(&format!(
            "Created {MANIFEST_FILE} and {LOCK_FILE} for `{name}` in {}\n",
            root.display()
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn default_name(root: &Path) -> Result<String> {
    let canonical = fs_err::canonicalize(root)?;
    match canonical.file_name().and_then(|name| name.to_str()) {
        Some(name) if !name.is_empty() => Ok(name.to_owned()),
        _ => bail!(
            "cannot derive a project name from {}\n  fix  pass --name",
            canonical.display()
        ),
    }
}
