//! Launch overhead through the real binary (run with `cargo bench -p agentpack-cli --bench launch`,
//! or `bench/launch.sh`).
//!
//! A project with 100 small path packages is synced, then `agentpack claude -- --version` starts a
//! stand-in `claude` (a shell script first on PATH) through the launcher's fast path; so do
//! stand-in `codex` and `opencode`, whose launches also prepare their home layer.
//! The number that matters is the wall time the launcher adds over running the stand-in directly
//! (goal: under 10 ms), as medians of interleaved runs, plus the launcher's peak memory
//! (`/usr/bin/time -v` when present, else `getrusage(RUSAGE_CHILDREN)` through python3).
//! Measures only when `--bench` is in argv, so `cargo test --benches` builds it and returns at once.
//! Then a no-op `sync` (inputs unchanged since the last full sync: the sync fast path) against the
//! launch fast path, at 10 and 100 path packages, in one interleaved run (goals: the sync under
//! 30 ms at 100 packages and at most 1.3x its 10-package time), with `AGENTPACK_FULL_VERIFY=1 sync`
//! (what every no-op sync did before) beside them.
//! Prints a Markdown table; `docs/src/benchmarks-launch.md` records a run. Nothing is asserted.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agentpack_test_support::IsolatedHome;

mod support;
use support::{bin, median, runs, timed_output};

const PACKAGES: usize = 100;

/// The stand-ins: Claude Code (no home layer), and two agents with a home layer.
const AGENTS: [&str; 3] = ["claude", "codex", "opencode"];

struct Setup {
    home: IsolatedHome,
    _packages: tempfile::TempDir,
    stand_in_dir: PathBuf,
    stand_in: PathBuf,
}

impl Setup {
    fn new() -> Self {
        Self::with_packages(PACKAGES)
    }

    fn with_packages(count: usize) -> Self {
        let home = IsolatedHome::new();
        let packages = tempfile::tempdir().unwrap();
        let mut manifest =
            String::from("name = \"bench\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
        for line in support::write_skill_packages(packages.path(), count) {
            manifest.push_str(&line);
            manifest.push('\n');
        }
        let init = home
            .command(&bin(), None)
            .args(["init", "--name", "bench"])
            .output()
            .unwrap();
        assert!(init.status.success());
        std::fs::write(home.project.join("agentpack.toml"), manifest).unwrap();
        let stand_in_dir = home.home.join("bin");
        std::fs::create_dir_all(&stand_in_dir).unwrap();
        let stand_in = stand_in_dir.join("claude");
        use std::os::unix::fs::PermissionsExt as _;
        for agent in AGENTS {
            let path = stand_in_dir.join(agent);
            std::fs::write(&path, "#!/bin/sh\necho 2.0.0 \"(stand-in)\"\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let setup = Setup {
            home,
            _packages: packages,
            stand_in_dir,
            stand_in,
        };
        let output = setup.agentpack(&["sync"]).output().unwrap();
        assert!(
            output.status.success(),
            "sync: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        setup
    }

    /// `agentpack <args>` with the stand-ins first on PATH.
    fn agentpack(&self, args: &[&str]) -> Command {
        let mut command = self.home.command(&bin(), None);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.stand_in_dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        command
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .args(args);
        command
    }

    fn launch(&self) -> Command {
        self.launch_agent("claude")
    }

    /// `agentpack <agent> -- --version` (Codex and OpenCode also prepare their home layer).
    fn launch_agent(&self, agent: &str) -> Command {
        self.agentpack(&["--quiet", agent, "--", "--version"])
    }

    /// A bare `agentpack sync` (quiet, so only the work is timed).
    fn sync(&self) -> Command {
        self.agentpack(&["--quiet", "sync"])
    }

    fn direct(&self) -> Command {
        let mut command = Command::new(&self.stand_in);
        command.arg("--version").current_dir(&self.home.project);
        command
    }
}

fn time(command: Command) -> Duration {
    time_checked(command, true)
}

/// The wall time of one successful run; `stand_in` when its output must be the stand-in's.
fn time_checked(mut command: Command, stand_in: bool) -> Duration {
    let (elapsed, output) = timed_output(&mut command);
    if stand_in {
        assert!(String::from_utf8_lossy(&output.stdout).contains("stand-in"));
    }
    elapsed
}

/// No-op sync, launch fast path and a fully verified sync at each package count, interleaved.
fn sync_benchmarks(runs: usize) {
    let counts = [10, 100];
    let setups: Vec<Setup> = counts.iter().map(|n| Setup::with_packages(*n)).collect();
    for setup in &setups {
        // The sync in `new` recorded the sync fast path; one launch records the launcher's.
        time(setup.launch());
        time(setup.launch());
        time_checked(setup.sync(), false);
    }
    let mut samples: Vec<[Vec<Duration>; 3]> = counts.iter().map(|_| Default::default()).collect();
    for _ in 0..runs {
        for (setup, samples) in setups.iter().zip(samples.iter_mut()) {
            samples[0].push(time_checked(setup.sync(), false));
            samples[1].push(time(setup.launch()));
        }
    }
    for _ in 0..runs.min(5) {
        for (setup, samples) in setups.iter().zip(samples.iter_mut()) {
            let mut command = setup.sync();
            command.env("AGENTPACK_FULL_VERIFY", "1");
            samples[2].push(time_checked(command, false));
        }
    }
    let medians: Vec<[Duration; 3]> = samples
        .into_iter()
        .map(|[a, b, c]| [median(a), median(b), median(c)])
        .collect();
    println!();
    println!(
        "## No-op sync against the launch fast path ({} runs interleaved, {} CPUs)",
        runs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| path packages | no-op `sync` | `claude -- --version`, fast path | sync / launch | `AGENTPACK_FULL_VERIFY=1 sync` |");
    println!("| --- | --- | --- | --- | --- |");
    for (count, [sync, launch, full]) in counts.iter().zip(&medians) {
        println!(
            "| {count} | {} | {} | {:.2}x | {} |",
            ms(*sync),
            ms(*launch),
            sync.as_secs_f64() / launch.as_secs_f64(),
            ms(*full)
        );
    }
    let growth = medians[1][0].as_secs_f64() / medians[0][0].as_secs_f64();
    println!();
    println!(
        "No-op sync at 100 packages / at 10 packages: **{growth:.2}x** (goal: at most 1.3x); at 100 packages: **{}** (goal: under 30 ms).",
        ms(medians[1][0])
    );
}

/// Two decimals: the fast paths measured here take a few milliseconds.
fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// Peak resident memory in KiB of one run of `command`, and how it was measured.
fn peak_memory(command: &Command) -> Option<(u64, &'static str)> {
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let envs: Vec<_> = command
        .get_envs()
        .map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned)))
        .collect();
    let dir = command.get_current_dir().map(Path::to_path_buf);
    let wrap = |wrapper: &str, prefix: &[&str]| {
        let mut wrapped = Command::new(wrapper);
        wrapped.args(prefix).arg(&program).args(&args);
        if !envs.is_empty() {
            // The launch commands start from a cleared environment.
            wrapped.env_clear();
            for (key, value) in &envs {
                if let Some(value) = value {
                    wrapped.env(key, value);
                }
            }
        }
        if let Some(dir) = &dir {
            wrapped.current_dir(dir);
        }
        wrapped
    };
    if Path::new("/usr/bin/time").is_file() {
        let output = wrap("/usr/bin/time", &["-v"]).output().ok()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let kib = stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))?
            .trim()
            .parse()
            .ok()?;
        return Some((kib, "/usr/bin/time -v"));
    }
    let script = "import resource, subprocess, sys\nsubprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    let output = wrap("python3", &["-c", script]).output().ok()?;
    let kib = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .ok()?;
    Some((kib, "getrusage(RUSAGE_CHILDREN)"))
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let runs = runs(21);
    if std::env::var_os("AGENTPACK_BENCH_ONLY_SYNC").is_some() {
        sync_benchmarks(runs);
        return;
    }
    let setup = Setup::new();
    // The first launch records the fast-path fingerprint; later ones take the fast path.
    time(setup.launch());
    time(setup.launch());

    let mut launched = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..runs {
        launched.push(time(setup.launch()));
        direct.push(time(setup.direct()));
    }
    // The agents whose launch also prepares a home layer from the generation.
    let mut layered = Vec::new();
    for agent in &AGENTS[1..] {
        time(setup.launch_agent(agent));
        time(setup.launch_agent(agent));
        let samples = (0..runs).map(|_| time(setup.launch_agent(agent))).collect();
        layered.push((*agent, median(samples)));
    }
    let mut full = Vec::new();
    for _ in 0..runs.min(5) {
        let mut command = setup.launch();
        command.env("AGENTPACK_FULL_VERIFY", "1");
        full.push(time(command));
    }
    let (launched, direct, full) = (median(launched), median(direct), median(full));
    let added = launched.saturating_sub(direct);

    println!(
        "## Launch ({PACKAGES} path packages, {} runs interleaved, {} CPUs)",
        runs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| measurement | median | ratio to the stand-in |");
    println!("| --- | --- | --- |");
    let ratio = |d: Duration| d.as_secs_f64() / direct.as_secs_f64();
    println!(
        "| stand-in `claude --version` run directly | {} | 1.00x |",
        ms(direct)
    );
    println!(
        "| `agentpack claude -- --version`, fast path | {} | {:.2}x |",
        ms(launched),
        ratio(launched)
    );
    println!(
        "| wall time added by the launcher (goal: under 10 ms) | **{}** | |",
        ms(added)
    );
    for (agent, launched) in &layered {
        println!(
            "| `agentpack {agent} -- --version`, fast path, home layer prepared | {} | {:.2}x |",
            ms(*launched),
            ratio(*launched)
        );
    }
    println!(
        "| `AGENTPACK_FULL_VERIFY=1 agentpack claude -- --version` (full sync, median of {}) | {} | {:.2}x |",
        runs.min(5),
        ms(full),
        ratio(full)
    );
    println!();
    match (peak_memory(&setup.launch()), peak_memory(&setup.direct())) {
        (Some((launch_kib, how)), Some((direct_kib, _))) => {
            println!("Peak resident memory ({how}; the launcher waits on the stand-in, so its figure is the larger of the two processes):");
            println!();
            println!("| process | peak RSS |");
            println!("| --- | --- |");
            println!(
                "| `agentpack claude -- --version`, fast path | {:.1} MiB |",
                launch_kib as f64 / 1024.0
            );
            println!("| stand-in alone | {:.1} MiB |", direct_kib as f64 / 1024.0);
        }
        _ => println!("Peak memory: neither /usr/bin/time nor python3 is available."),
    }
    drop(setup);
    sync_benchmarks(runs);
}
