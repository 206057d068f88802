//! Retiring Codex homes with their daemons: a stand-in daemon on the home's control socket says
//! which threads it has loaded, and a stand-in `codex` records how it was asked to stop it.
//! (The real Codex daemon is exercised through the binary in cli/tests/it/launch_conformance.rs.)

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentpack_harness::launch::home_layer::codex_daemon::{self, DaemonUse};
use agentpack_harness::launch::home_layer::{self, DaemonPolicy};
use agentpack_test_support::codex_daemon::StandInDaemon;

/// A stand-in `codex` that logs its arguments and `CODEX_HOME`, and stops the stand-in daemon.
fn stand_in_codex(dir: &Path) -> PathBuf {
    let path = dir.join("codex");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$CODEX_HOME $*\" >> {log}\ntouch \"$CODEX_HOME/stand-in-stop\"\n",
            log = dir.join("codex.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A state dir with a retired Codex home of generation `deadbeef` (short paths: the socket must fit).
struct World {
    _dir: tempfile::TempDir,
    state_dir: PathBuf,
    staging_root: PathBuf,
    retired: PathBuf,
    bin: PathBuf,
}

fn world() -> World {
    let dir = tempfile::Builder::new()
        .prefix("cd")
        .tempdir_in("/tmp")
        .unwrap();
    let state_dir = dir.path().join("state");
    let staging_root = dir.path().join("s");
    let retired = home_layer::codex_home_dir(Some(&staging_root), "p1", "default", "deadbeef");
    assert!(retired.starts_with(&staging_root), "{}", retired.display());
    std::fs::create_dir_all(&retired).unwrap();
    std::fs::write(retired.join("config.toml"), "").unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    World {
        state_dir,
        staging_root,
        retired,
        bin,
        _dir: dir,
    }
}

fn prune(w: &World, codex: Option<&Path>) -> home_layer::PruneReport {
    let keep: BTreeSet<String> = ["0a1b2c3d".to_string()].into_iter().collect();
    let policy = DaemonPolicy {
        codex,
        probe_timeout: Duration::from_secs(2),
    };
    home_layer::prune_layers(
        &w.state_dir,
        "default",
        "p1",
        Some(&w.staging_root),
        &keep,
        &policy,
    )
    .unwrap()
}

#[test]
fn a_daemon_with_loaded_threads_keeps_its_home_and_is_not_stopped() {
    let w = world();
    let codex = stand_in_codex(&w.bin);
    let daemon = StandInDaemon::start(&w.retired, &["t1", "t2", "t3"]);
    assert_eq!(
        codex_daemon::probe(&w.retired, Duration::from_secs(2)),
        DaemonUse::Busy {
            loaded_threads: vec!["t1".into(), "t2".into(), "t3".into()]
        },
        "every page of thread/loaded/list is read"
    );
    let report = prune(&w, Some(&codex));
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.busy, vec![w.retired.clone()]);
    assert!(report.warnings.is_empty(), "{report:?}");
    assert!(w.retired.join("config.toml").is_file());
    assert!(
        !w.bin.join("codex.log").exists(),
        "a busy daemon is never asked to stop"
    );
    drop(daemon);
}

#[test]
fn an_idle_daemon_is_stopped_with_codex_and_its_home_removed() {
    let w = world();
    let codex = stand_in_codex(&w.bin);
    let daemon = StandInDaemon::start(&w.retired, &[]);
    assert_eq!(
        codex_daemon::probe(&w.retired, Duration::from_secs(2)),
        DaemonUse::Idle
    );
    let report = prune(&w, Some(&codex));
    assert_eq!(
        report.stopped_daemons,
        vec![w.retired.clone()],
        "{report:?}"
    );
    assert_eq!(report.removed, vec![w.retired.clone()]);
    assert!(!w.retired.exists());
    let log = std::fs::read_to_string(w.bin.join("codex.log")).unwrap();
    assert_eq!(
        log.trim(),
        format!("{} app-server daemon stop", w.retired.display())
    );
    drop(daemon);
}

#[test]
fn an_idle_daemon_without_a_codex_to_stop_it_keeps_its_home_with_a_warning() {
    let w = world();
    let daemon = StandInDaemon::start(&w.retired, &[]);
    let report = prune(&w, None);
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.warnings.len(), 1, "{report:?}");
    assert!(
        report.warnings[0].contains(&w.retired.display().to_string())
            && report.warnings[0].contains("CODEX_PATH"),
        "{report:?}"
    );
    assert!(w.retired.is_dir());
    drop(daemon);
}

#[test]
fn a_stale_socket_with_no_daemon_does_not_keep_a_home() {
    let w = world();
    let daemon = StandInDaemon::start(&w.retired, &["t1"]);
    drop(daemon); // the socket file is gone with it; leave a stale one behind
    let listener =
        std::os::unix::net::UnixListener::bind(w.retired.join(codex_daemon::CONTROL_SOCKET))
            .unwrap();
    drop(listener);
    assert_eq!(
        codex_daemon::probe(&w.retired, Duration::from_secs(2)),
        DaemonUse::NotRunning
    );
    let report = prune(&w, None);
    assert_eq!(report.removed, vec![w.retired.clone()], "{report:?}");
}
