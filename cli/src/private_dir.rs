//! Private per-user directories (0700) for records that hold identities, request metadata or
//! evidence: probe receipts, proxy logs. Owns [`ensure`]; never writes a file in them.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::Path;

/// Creates `dir` (and its parents) if missing, and makes it 0700 whoever created it.
pub fn ensure(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}
