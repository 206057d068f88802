//! What an MCP server's command line runs: the runner (`npx`, `bunx`, `pnpm dlx`, `yarn dlx`,
//! `uvx`, `docker`, ...) and, for npm runners, the package spec it names.
//!
//! Pure: parses strings only. It must never decide a pin by itself (that needs the registry); it
//! only says whether a spec *can* be pinned (an exact version or a dist-tag) or not (a range, a
//! Git or tarball spec, `npx --package`).

/// An npm runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpmRunner {
    /// `npx` (the only runner whose dependency tree agentpack locks).
    Npx,
    /// `bunx`.
    Bunx,
    /// `pnpm dlx`.
    PnpmDlx,
    /// `yarn dlx`.
    YarnDlx,
}

/// What a spec asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRequest {
    /// An exact version (`1.2.3`).
    Exact(String),
    /// A dist-tag (`latest`, `next`); a bare name means `latest`.
    Tag(String),
}

/// A package spec that can be pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRequest {
    /// The package name (`@scope/name` or `name`).
    pub name: String,
    /// The version or dist-tag.
    pub version: VersionRequest,
}

/// An npm runner's command line, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmInvocation {
    /// The runner.
    pub runner: NpmRunner,
    /// The spec as written (`@playwright/mcp@latest`), when one was found.
    pub requested: Option<String>,
    /// Index of the spec in the server's `args`.
    pub spec_index: Option<usize>,
    /// The pinnable request, or why there is none.
    pub request: Result<PackageRequest, String>,
    /// The server's own arguments after the spec.
    pub server_args: Vec<String>,
}

/// How a server starts, as far as the lock is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// An npm runner.
    Npm(NpmInvocation),
    /// A PyPI runner (`uvx`, `uv tool run`, `pipx run`): recorded, not resolved.
    Pypi {
        /// The spec as written.
        requested: Option<String>,
    },
    /// `docker run`: recorded, not resolved.
    Docker {
        /// The image as written.
        image: Option<String>,
    },
    /// A remote server (`url`).
    Remote {
        /// The URL's host.
        host: Option<String>,
    },
    /// Any other command (a local script, a binary on PATH).
    Command {
        /// The command.
        command: String,
    },
}

impl Launch {
    /// The `launcher` field of the lock record.
    pub fn launcher(&self) -> &'static str {
        match self {
            Launch::Npm(_) => "npm",
            Launch::Pypi { .. } => "pypi",
            Launch::Docker { .. } => "docker",
            Launch::Remote { .. } => "remote",
            Launch::Command { .. } => "command",
        }
    }
}

fn program_name(command: &str) -> &str {
    let base = command.rsplit('/').next().unwrap_or(command);
    base.strip_suffix(".cmd")
        .or_else(|| base.strip_suffix(".exe"))
        .unwrap_or(base)
}

/// Classifies a server by its command, arguments and URL.
pub fn classify(command: Option<&str>, args: &[String], url: Option<&str>) -> Launch {
    let Some(command) = command else {
        let host = url
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(str::to_owned));
        return Launch::Remote { host };
    };
    let first = args.first().map(String::as_str);
    match (program_name(command), first) {
        ("npx", _) => Launch::Npm(parse_runner(NpmRunner::Npx, args, 0)),
        ("bunx", _) => Launch::Npm(parse_runner(NpmRunner::Bunx, args, 0)),
        ("pnpm", Some("dlx")) => Launch::Npm(parse_runner(NpmRunner::PnpmDlx, args, 1)),
        ("yarn", Some("dlx")) => Launch::Npm(parse_runner(NpmRunner::YarnDlx, args, 1)),
        ("uvx", _) | ("pipx", Some("run")) => Launch::Pypi {
            requested: first_positional(args, usize::from(program_name(command) == "pipx")),
        },
        ("uv", Some("tool")) if args.get(1).map(String::as_str) == Some("run") => Launch::Pypi {
            requested: first_positional(args, 2),
        },
        ("docker" | "podman", Some("run")) => Launch::Docker {
            image: docker_image(&args[1..]),
        },
        _ => Launch::Command {
            command: command.to_owned(),
        },
    }
}

/// The first argument after `skip` that is not a flag, nor a credential a flag names (`uvx
/// --api-key KEY pkg` requests `pkg`, and `KEY` must never reach `pack.lock`).
fn first_positional(args: &[String], skip: usize) -> Option<String> {
    let credentials = agentpack_harness::render::credentials::credential_args(args);
    args.iter()
        .enumerate()
        .skip(skip)
        .find(|(index, a)| !a.starts_with('-') && !credentials.contains(index))
        .map(|(_, a)| a.clone())
}

/// `docker run` flags that take a value.
const DOCKER_VALUE_FLAGS: &[&str] = &[
    "-e",
    "--env",
    "-v",
    "--volume",
    "-p",
    "--publish",
    "--name",
    "-w",
    "--workdir",
    "--network",
    "-u",
    "--user",
    "--entrypoint",
    "--env-file",
    "--mount",
    "--platform",
    "-l",
    "--label",
];

fn docker_image(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if DOCKER_VALUE_FLAGS.contains(&arg.as_str()) {
            iter.next();
        } else if !arg.starts_with('-') {
            return Some(arg.clone());
        }
    }
    None
}

/// Runner flags that mean "run something other than one named package".
const PACKAGE_FLAGS: &[&str] = &["-p", "--package", "-c", "--call", "--shell-mode"];
/// Runner flags that take a value.
const VALUE_FLAGS: &[&str] = &["--registry", "--cache", "--userconfig", "--prefix"];

fn parse_runner(runner: NpmRunner, args: &[String], skip: usize) -> NpmInvocation {
    let mut index = skip;
    let mut after_dashes = false;
    while index < args.len() {
        let arg = &args[index];
        if !after_dashes && arg == "--" {
            after_dashes = true;
            index += 1;
            continue;
        }
        if !after_dashes && arg.starts_with('-') {
            let flag = arg.split('=').next().unwrap_or(arg);
            if PACKAGE_FLAGS.contains(&flag) {
                let name = match runner {
                    NpmRunner::Npx => "npx",
                    NpmRunner::Bunx => "bunx",
                    NpmRunner::PnpmDlx => "pnpm dlx",
                    NpmRunner::YarnDlx => "yarn dlx",
                };
                return NpmInvocation {
                    runner,
                    requested: None,
                    spec_index: None,
                    request: Err(format!(
                        "`{name} {flag}` runs a command, not one named package; name the package and its exact version or dist-tag instead"
                    )),
                    server_args: Vec::new(),
                };
            }
            if VALUE_FLAGS.contains(&flag) && !arg.contains('=') {
                index += 1;
            }
            index += 1;
            continue;
        }
        return NpmInvocation {
            runner,
            requested: Some(arg.clone()),
            spec_index: Some(index),
            request: parse_package_spec(arg),
            server_args: args[index + 1..].to_vec(),
        };
    }
    NpmInvocation {
        runner,
        requested: None,
        spec_index: None,
        request: Err("no package is named in the arguments".into()),
        server_args: Vec::new(),
    }
}

/// Parses `name`, `name@1.2.3`, `name@tag`, `@scope/name@...`. `Err` says why a spec cannot be
/// pinned (a range, a Git, tarball, path or alias spec).
pub fn parse_package_spec(spec: &str) -> Result<PackageRequest, String> {
    const OTHER: &[&str] = &[
        "git+",
        "git://",
        "github:",
        "gitlab:",
        "bitbucket:",
        "gist:",
        "http://",
        "https://",
        "file:",
        "link:",
        ".",
        "/",
        "~",
    ];
    if OTHER.iter().any(|p| spec.starts_with(p))
        || spec.ends_with(".tgz")
        || spec.ends_with(".tar.gz")
    {
        return Err(format!(
            "`{spec}` is a Git, tarball or path spec; use a registry package with an exact version or a dist-tag"
        ));
    }
    let (name, version) = match spec.strip_prefix('@') {
        Some(rest) => match rest.split_once('@') {
            Some((n, v)) => (format!("@{n}"), Some(v)),
            None => (spec.to_owned(), None),
        },
        None => match spec.split_once('@') {
            Some((n, v)) => (n.to_owned(), Some(v)),
            None => (spec.to_owned(), None),
        },
    };
    if version.is_some_and(|v| v.starts_with("npm:")) {
        return Err(format!("`{spec}` is an alias; name the package itself"));
    }
    let valid_name = {
        let parts: Vec<&str> = name.trim_start_matches('@').split('/').collect();
        let scoped = name.starts_with('@');
        (if scoped {
            parts.len() == 2
        } else {
            parts.len() == 1
        }) && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
        })
    };
    if !valid_name {
        return Err(format!(
            "`{spec}` is not a registry package name (a GitHub shorthand?); use a registry package with an exact version or a dist-tag"
        ));
    }
    let version = match version {
        None | Some("") => VersionRequest::Tag("latest".into()),
        Some(v) => {
            let bare = v.strip_prefix('=').unwrap_or(v);
            let bare = bare.strip_prefix('v').unwrap_or(bare);
            if semver::Version::parse(bare).is_ok() {
                VersionRequest::Exact(bare.to_owned())
            } else if semver::VersionReq::parse(v).is_ok()
                || v.contains(['^', '~', '<', '>', '=', '*', '|', ' '])
                || v.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                return Err(format!(
                    "`{spec}` names a version range; use an exact version or a dist-tag"
                ));
            } else if v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                VersionRequest::Tag(v.to_owned())
            } else {
                return Err(format!("`{spec}` has a version agentpack cannot read"));
            }
        }
    };
    Ok(PackageRequest { name, version })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_credential_flag_value_is_never_the_requested_package() {
        let args: Vec<String> = ["--api-key", "sk-live-SENTINEL-123456", "mcp-retrieval"]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        assert_eq!(
            super::first_positional(&args, 0).as_deref(),
            Some("mcp-retrieval")
        );
    }
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn specs() {
        let p = parse_package_spec("@playwright/mcp@latest").unwrap();
        assert_eq!(p.name, "@playwright/mcp");
        assert_eq!(p.version, VersionRequest::Tag("latest".into()));
        assert_eq!(
            parse_package_spec("pkg").unwrap().version,
            VersionRequest::Tag("latest".into())
        );
        assert_eq!(
            parse_package_spec("pkg@1.2.3").unwrap().version,
            VersionRequest::Exact("1.2.3".into())
        );
        assert_eq!(
            parse_package_spec("@s/p").unwrap().version,
            VersionRequest::Tag("latest".into())
        );
        for unpinned in [
            "pkg@^1.2",
            "pkg@1",
            "pkg@1.x",
            "pkg@>=1 <2",
            "github:a/b",
            "a/b",
            "https://x/y.tgz",
            "./local",
            "x@npm:y@1.0.0",
        ] {
            assert!(parse_package_spec(unpinned).is_err(), "{unpinned}");
        }
    }

    #[test]
    fn runners() {
        let Launch::Npm(npx) =
            classify(Some("npx"), &args(&["-y", "pkg@next", "--headless"]), None)
        else {
            panic!()
        };
        assert_eq!(npx.spec_index, Some(1));
        assert_eq!(npx.server_args, args(&["--headless"]));
        let Launch::Npm(pkg) = classify(Some("npx"), &args(&["--package", "a", "b"]), None) else {
            panic!()
        };
        assert!(pkg.request.is_err());
        let Launch::Npm(dlx) = classify(Some("pnpm"), &args(&["dlx", "x@1.0.0"]), None) else {
            panic!()
        };
        assert_eq!(dlx.runner, NpmRunner::PnpmDlx);
        assert_eq!(dlx.spec_index, Some(1));
        assert_eq!(
            classify(Some("uvx"), &args(&["m"]), None).launcher(),
            "pypi"
        );
        assert_eq!(
            classify(
                Some("docker"),
                &args(&["run", "-i", "--rm", "-e", "K", "img:1"]),
                None
            ),
            Launch::Docker {
                image: Some("img:1".into())
            }
        );
        assert_eq!(
            classify(None, &[], Some("https://mcp.example.com/sse")),
            Launch::Remote {
                host: Some("mcp.example.com".into())
            }
        );
        assert_eq!(
            classify(Some("node"), &args(&["x.js"]), None).launcher(),
            "command"
        );
    }
}
