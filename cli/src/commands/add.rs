//! `agentpack add <spec>` and `agentpack remove <spec>`: edit `[dependencies]`, re-resolve, sync.
//!
//! Both are transactions over the two files ([`ManifestEditSession`], one session: each file is
//! read once and the edit resolved once): resolution runs on the edited manifest in memory, then the
//! manifest and the lock are written, then (unless `--no-sync`) the project is synced. If any step
//! fails, `agentpack.toml` and `pack.lock` are put back exactly as they were. Edits keep the user's
//! comments, order and spacing (`ManifestDocument`).

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use agentpack_builders::github::RepoId;
use agentpack_builders::plugin_add::resolve_plugin;
use agentpack_builders::project::ProjectSession;
use agentpack_lockfile::{
    parse_spec, CommitSha, Dependency, GithubSpec, ModuleId, PackageSpec, Pin,
};
use anyhow::{bail, Context as _, Result};
use clap::Args;

use crate::context::Context;
use crate::output;
use crate::pipeline::edit::{module_of, ManifestEditSession};
use crate::project::Project;

#[derive(Debug, Args)]
pub struct AddArgs {
    /// A module id, owner/repo[/path], a GitHub tree/blob URL, a local/alias name or a directory,
    /// with an optional @ref (branch, tag, commit or version constraint).
    pub spec: String,
    /// Add one plugin of the marketplace catalog the spec names.
    #[arg(long, value_name = "NAME")]
    pub plugin: Option<String>,
    /// Resolve and lock, but do not stage.
    #[arg(long)]
    pub no_sync: bool,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The dependency to drop: its key in agentpack.toml, or a spec naming it.
    pub spec: String,
    /// Update the files, but do not stage.
    #[arg(long)]
    pub no_sync: bool,
}

pub fn run_add(ctx: &Context, args: &AddArgs) -> Result<ExitCode> {
    let mut edit = ManifestEditSession::open(ctx)?;
    let (module, dependency) = dependency_for(ctx, &edit.project, &edit.session, args)?;
    let existing = edit
        .document
        .to_manifest()?
        .dependencies
        .get(&module)
        .cloned();
    if let Some(existing) = &existing {
        check_replaceable(&edit.project, args, &module, existing, &dependency)?;
    }
    edit.document.set_dependency(&module, &dependency)?;
    edit.apply(ctx, args.no_sync, format!("add {}", args.spec), |_| Ok(()))?;
    if ctx.says() {
        output::info(&format!("Added {module}"));
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses an `add` whose dependency name is already taken by another source: a path dependency
/// pointing at another directory, or a path and a remote dependency sharing one name. The same
/// directory again, or a new pin for the same remote module, is fine (the entry is rewritten).
fn check_replaceable(
    project: &Project,
    args: &AddArgs,
    module: &ModuleId,
    existing: &Dependency,
    wanted: &Dependency,
) -> Result<()> {
    let describe = |dependency: &Dependency| match dependency {
        Dependency::Path(dir) => format!("the directory {dir}"),
        Dependency::Remote(_) => format!("the remote package {module}"),
    };
    let same_source = match (existing, wanted) {
        (Dependency::Path(old), Dependency::Path(new)) => {
            old == new || same_directory(&project.root, old, new)
        }
        (Dependency::Remote(_), Dependency::Remote(_)) => true,
        _ => false,
    };
    if same_source {
        return Ok(());
    }
    let alternative = match (existing, wanted) {
        (_, Dependency::Path(dir)) => format!(
            "declare the new directory under another name in agentpack.toml, e.g. \"{}-2\" = {{ path = \"{dir}\" }}, then run `agentpack lock`",
            module.as_str()
        ),
        _ => "give the path dependency another name in agentpack.toml, then run `agentpack lock`"
            .to_owned(),
    };
    bail!(
        "cannot add {spec}: {manifest} already has a dependency named {module}: {existing}, not {wanted}\n  fix       remove it first (`agentpack remove {module}`), or {alternative}",
        spec = args.spec,
        manifest = project.manifest_path.display(),
        existing = describe(existing),
        wanted = describe(wanted),
    )
}

/// Do two path dependencies (relative to the project root) name one directory?
fn same_directory(root: &Path, a: &str, b: &str) -> bool {
    match (
        fs_err::canonicalize(root.join(a)),
        fs_err::canonicalize(root.join(b)),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The manifest key and value `add` writes for the spec.
fn dependency_for(
    ctx: &Context,
    project: &Project,
    session: &ProjectSession,
    args: &AddArgs,
) -> Result<(ModuleId, Dependency)> {
    let spec = parse_spec(&args.spec)?;
    if let Some(plugin) = &args.plugin {
        let PackageSpec::Github(marketplace) = spec else {
            bail!(
                "--plugin needs a GitHub marketplace repository (owner/repo[@ref]), not `{}`",
                args.spec
            );
        };
        let github = session.github()?;
        let addition = resolve_plugin(
            &github.fetcher,
            &RepoId::new(&marketplace.owner, &marketplace.repo),
            &marketplace.path,
            marketplace.reference.as_deref(),
            plugin,
        )?;
        for warning in addition
            .warnings
            .iter()
            .chain(&github.fetcher.take_warnings())
        {
            output::warn(warning);
        }
        return Ok((addition.module, Dependency::Remote(addition.pin)));
    }
    Ok(match spec {
        PackageSpec::Github(github) => {
            let pin = Pin::from_reference(github.reference.as_deref())?;
            let pin = full_commit_pin(session, &github, pin)?;
            (github.module, Dependency::Remote(pin))
        }
        PackageSpec::Name { name, reference } => (
            name,
            Dependency::Remote(Pin::from_reference(reference.as_deref())?),
        ),
        PackageSpec::Oci(oci) => (oci.module, Dependency::Remote(oci.pin)),
        PackageSpec::Path(path) => {
            let dir = ctx.cwd.join(&path);
            let dir = fs_err::canonicalize(&dir)
                .with_context(|| format!("cannot add {path}: the directory does not exist"))?;
            if !dir.is_dir() {
                bail!("cannot add {path}: it is not a directory");
            }
            let key = dir
                .file_name()
                .map(|name| key_from_dir_name(&name.to_string_lossy()))
                .filter(|key| !key.is_empty())
                .with_context(|| {
                    format!("cannot derive a dependency name from {}", dir.display())
                })?;
            let module = ModuleId::parse(&key).with_context(|| {
                format!(
                    "cannot use `{key}` (from {}) as a dependency name",
                    dir.display()
                )
            })?;
            (module, Dependency::Path(relative_to(&project.root, &dir)))
        }
    })
}

/// A short commit (`owner/repo@340e33a`) as the `{ commit = "<full sha>" }` pin it means: saved
/// as the string it was typed as, it would later read as a branch or tag name. A name GitHub does
/// not resolve to a commit starting with it (a branch or tag such as `beef`) stays a name.
fn full_commit_pin(session: &ProjectSession, github: &GithubSpec, pin: Pin) -> Result<Pin> {
    let Some(name) = github.reference.as_deref() else {
        return Ok(pin);
    };
    let hex = name.chars().all(|c| c.is_ascii_hexdigit());
    let digits = name.chars().all(|c| c.is_ascii_digit());
    // Hex with a letter reads as a name, all digits as an exact version (`=9586193`): a commit
    // abbreviation the way git prints one is 7 digits or more.
    let looks_short = match &pin {
        Pin::Ref(_) => hex && (4..40).contains(&name.len()),
        Pin::Version(_) => digits && (7..40).contains(&name.len()),
        _ => false,
    };
    if !looks_short {
        return Ok(pin);
    }
    let repo = RepoId::new(&github.owner, &github.repo);
    let Ok(resolved) =
        session
            .github()?
            .resolver()
            .resolve_name(github.module.as_str(), &repo, name)
    else {
        // Resolution names the problem when the lock runs.
        return Ok(pin);
    };
    if !resolved
        .commit
        .to_ascii_lowercase()
        .starts_with(&name.to_ascii_lowercase())
    {
        return Ok(pin);
    }
    for warning in &resolved.warnings {
        output::warn(warning);
    }
    Ok(Pin::Commit(CommitSha::parse(&resolved.commit)?))
}

/// A directory name as a dependency key: lowercase, other characters as `-`.
fn key_from_dir_name(name: &str) -> String {
    let key: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    key.trim_matches(|c| c == '-' || c == '.').to_owned()
}

/// `target` relative to `base` (both absolute and canonical), `/`-separated.
fn relative_to(base: &Path, target: &Path) -> String {
    let base: Vec<Component<'_>> = base.components().collect();
    let target: Vec<Component<'_>> = target.components().collect();
    let common = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in common..base.len() {
        relative.push("..");
    }
    for component in &target[common..] {
        relative.push(component);
    }
    let text = relative.to_string_lossy().replace('\\', "/");
    if text.is_empty() {
        ".".to_owned()
    } else if text.starts_with("..") {
        text
    } else {
        format!("./{text}")
    }
}

pub fn run_remove(ctx: &Context, args: &RemoveArgs) -> Result<ExitCode> {
    let mut edit = ManifestEditSession::open(ctx)?;
    let module = match ModuleId::parse(&args.spec) {
        Ok(module) => module,
        Err(_) => ModuleId::parse(&module_of(&args.spec)?)?,
    };
    if !edit.document.remove_dependency(&module) {
        bail!(
            "{module} is not a dependency in {}\n  fix  check the key under [dependencies]",
            edit.project.manifest_path.display()
        );
    }
    let pruned = edit.document.remove_selectors_for_module(&module);
    edit.apply(ctx, args.no_sync, format!("remove {}", args.spec), |_| {
        Ok(())
    })?;
    if ctx.says() {
        let also = if pruned > 0 {
            format!(" and {pruned} mode selector(s) naming it")
        } else {
            String::new()
        };
        output::info(&format!("Removed {module}{also}"));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_and_keys() {
        assert_eq!(relative_to(Path::new("/a/b"), Path::new("/a/c")), "../c");
        assert_eq!(
            relative_to(Path::new("/a/b"), Path::new("/a/b/c/d")),
            "./c/d"
        );
        assert_eq!(relative_to(Path::new("/a/b"), Path::new("/a/b")), ".");
        assert_eq!(key_from_dir_name("My Rules!"), "my-rules");
    }
}
