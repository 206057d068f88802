//! Two real unprivileged users in one group, for tests that must not run as root (root may write
//! read-only files, rename anything and read every directory, which hides the permission problems a
//! store shared by several users has).
//!
//! [`test_users`] makes the group `apk-test` and the users `apk-test-a` and `apk-test-b` (primary group
//! `apk-test`, no home directory, no login shell) when running as root, idempotently (other test
//! binaries may do it at the same moment: a busy `/etc/passwd` is retried). [`require_test_users`] is
//! what a test calls: when the users cannot be used (not root, no `useradd`/`setpriv`) it panics under
//! `CI=true` and otherwise prints why and returns `None`, so the test can skip.
//! [`TestUser::command`] runs a program as that user through `setpriv` (util-linux), with the group as
//! its only group.
//!
//! Never deletes users or groups; never touches anything but the account databases through the
//! `groupadd`/`useradd` tools.

use std::path::Path;
use std::process::Command;

/// The group both test users share.
pub const TEST_GROUP: &str = "apk-test";
/// The first test user.
pub const TEST_USER_A: &str = "apk-test-a";
/// The second test user.
pub const TEST_USER_B: &str = "apk-test-b";

/// One unprivileged test user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestUser {
    /// Login name.
    pub name: String,
    /// Numeric user id.
    pub uid: u32,
    /// The group it runs with ([`TEST_GROUP`]).
    pub gid: u32,
}

impl TestUser {
    /// `program` run as this user (real and effective uid and gid), with [`TEST_GROUP`] as its only
    /// group, through `setpriv`. The environment is inherited: set `HOME` and friends yourself.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("setpriv");
        command
            .arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg(format!("--groups={}", self.gid))
            .arg("--")
            .arg(program);
        command
    }
}

/// The two test users and their group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestUsers {
    /// `apk-test-a`.
    pub a: TestUser,
    /// `apk-test-b`.
    pub b: TestUser,
    /// The gid of [`TEST_GROUP`].
    pub gid: u32,
}

/// Whether this process runs as root (uid 0), read from `/proc/self/status`.
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Field `index` of the `/etc/passwd`- or `/etc/group`-style line for `name` in `file`.
fn account_field(file: &str, name: &str, index: usize) -> Option<u32> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&name))
        .and_then(|fields| fields.get(index).and_then(|id| id.parse().ok()))
}

/// Run an account tool, retrying while another process holds the account databases' lock.
fn account_tool(program: &str, args: &[&str]) -> Result<(), String> {
    for attempt in 0..50 {
        let out = Command::new(program)
            .args(args)
            .output()
            .map_err(|err| format!("cannot run {program}: {err}"))?;
        // 9: the name is already in use (another test made it first).
        if out.status.success() || out.status.code() == Some(9) {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let busy = stderr.contains("lock") || stderr.contains("try again");
        if !busy || attempt == 49 {
            return Err(format!("{program} {args:?} failed: {stderr}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Ok(())
}

/// Make (if needed) and return the two test users. `Err` says why they cannot be used here.
pub fn test_users() -> Result<TestUsers, String> {
    if !running_as_root() {
        return Err(format!(
            "not running as root, so the test users {TEST_USER_A} and {TEST_USER_B} cannot be created or switched to"
        ));
    }
    for tool in ["setpriv", "groupadd", "useradd"] {
        let found = ["/usr/bin", "/usr/sbin", "/bin", "/sbin"]
            .iter()
            .any(|dir| Path::new(dir).join(tool).exists());
        if !found {
            return Err(format!("{tool} is not installed"));
        }
    }
    if account_field("/etc/group", TEST_GROUP, 2).is_none() {
        account_tool("groupadd", &["-f", TEST_GROUP])?;
    }
    let gid = account_field("/etc/group", TEST_GROUP, 2)
        .ok_or_else(|| format!("group {TEST_GROUP} was not created"))?;
    let mut users = Vec::new();
    for name in [TEST_USER_A, TEST_USER_B] {
        if account_field("/etc/passwd", name, 2).is_none() {
            account_tool(
                "useradd",
                &[
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                    "--gid",
                    TEST_GROUP,
                    name,
                ],
            )?;
        }
        let uid = account_field("/etc/passwd", name, 2)
            .ok_or_else(|| format!("user {name} was not created"))?;
        users.push(TestUser {
            name: name.to_owned(),
            uid,
            gid,
        });
    }
    let b = users.pop().ok_or("no user b")?;
    let a = users.pop().ok_or("no user a")?;
    Ok(TestUsers { a, b, gid })
}

/// The test users, or `None` after printing why the test is skipped. Under `CI=true` a test that
/// cannot get them fails instead: CI must run these tests for real.
pub fn require_test_users() -> Option<TestUsers> {
    match test_users() {
        Ok(users) => Some(users),
        Err(reason) => {
            crate::skip(format!(
                "the two-user tests cannot run: {reason} (run the tests as root so they can create their users)"
            ));
            None
        }
    }
}

/// A temporary directory under `/tmp` that both test users can enter and create files in (mode 1777,
/// like `/tmp`), removed with everything in it (read-only directories included) when dropped.
pub struct SharedTempDir(tempfile::TempDir);

impl SharedTempDir {
    /// A new one.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("apk-users-")
            .tempdir_in("/tmp")
            .unwrap();
        set_mode(dir.path(), 0o1777);
        SharedTempDir(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Default for SharedTempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SharedTempDir {
    fn drop(&mut self) {
        crate::files::make_writable(self.0.path());
    }
}

/// Set the permission bits of `path`.
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `du -sB1 <path>`: the bytes the filesystem allocates for the tree (each inode once).
pub fn du_bytes(path: &Path) -> u64 {
    let out = Command::new("du").arg("-sB1").arg(path).output().unwrap();
    assert!(out.status.success(), "du failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap()
}
