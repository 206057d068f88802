//! [`Store::open`]: creating or opening the on-disk layout, the shared-directory checks (sticky,
//! setgid, group-writable) and the hygiene files; [`Store::open_read_only`]: opening what is there
//! and creating nothing.
//!
//! Must never delete or rewrite anything already in the store; `open` only creates what is
//! missing, `open_read_only` nothing at all.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, filesystem_kind, set_mode};
use crate::link::Linker;

/// What [`make_sticky`] found.
pub(super) enum SharedDir {
    /// Sticky, setgid, group-writable, and the administrator's (or this user's, who just made it).
    Ok,
    /// Owned by this other user (neither the administrator nor root), who may remove anyone's entries
    /// in it.
    NotAdmins(u32),
    /// Lacks the bits and belongs to someone else: this warning says how to fix it.
    NotSticky(String),
}

/// Give a shared directory the sticky bit (and the group bits) when this user owns it, so no member
/// can rename or remove another member's entries; report one owned by another user than the store's
/// owner (`admin`) or root, and one that lacks the bits and that this user cannot change.
pub(super) fn make_sticky(path: &Path, admin: u32) -> Result<SharedDir> {
    let meta = fs_err::symlink_metadata(path).ctx("inspect", path)?;
    let mode = meta.mode() & 0o7777;
    let owner = meta.uid();
    if mode & fsutil::SHARED_DIR_BITS != fsutil::SHARED_DIR_BITS {
        if owner != fsutil::euid() {
            return Ok(SharedDir::NotSticky(format!(
                "warning: the shared store directory {} has mode {mode:04o}: without the sticky bit any member of the group can replace what another member published there; as its owner or root run `chmod 3775 {}` (see docs/src/shared-store.md)",
                path.display(),
                path.display()
            )));
        }
        set_mode(path, mode | fsutil::SHARED_DIR_BITS)?;
    }
    // (This user's own directories are no threat to this user: the warning is for the others.)
    if owner != admin && owner != 0 && owner != fsutil::euid() {
        return Ok(SharedDir::NotAdmins(owner));
    }
    Ok(SharedDir::Ok)
}

pub(super) fn create_dir_if_missing(path: &Path, mode: Option<u32>) -> Result<()> {
    match std::fs::create_dir(path) {
        Ok(()) => {
            if let Some(mode) = mode {
                set_mode(path, mode)?;
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(StoreError::io("create", path, err)),
    }
}

pub(super) fn write_if_missing(path: &Path, content: &[u8]) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let options = agentpack_fs::WriteOptions {
        mode: agentpack_fs::FileMode::Exact(0o644),
        durability: agentpack_fs::Durability::None,
        temp: agentpack_fs::TempName::Prefix(".new-"),
    };
    Ok(agentpack_fs::write_file(path, content, &options)?)
}

impl Store {
    /// Open the store of `cache_dir` for reading only (preflight, probe): creates nothing (no
    /// directory, no hygiene file, no index, no temp-roots file), takes no lock and never repairs.
    /// Every write through the handle fails with [`StoreError::ReadOnly`]; slot reads register no
    /// temp root. A store nobody made yet (`cache_dir` or its layout missing) opens as an empty
    /// one ([`Store::exists`] is false; every slot is missing); a `cache_dir` that is not a
    /// directory is an error.
    pub fn open_read_only(cache_dir: &Path, options: StoreOptions) -> Result<Store> {
        let cache_dir = match fs_err::metadata(cache_dir) {
            Ok(meta) if meta.is_dir() => {
                fs_err::canonicalize(cache_dir).ctx("resolve", cache_dir)?
            }
            Ok(_) => {
                return Err(StoreError::io(
                    "open",
                    cache_dir,
                    std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
                ))
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                std::path::absolute(cache_dir).ctx("resolve", cache_dir)?
            }
            Err(err) => return Err(StoreError::io("inspect", cache_dir, err)),
        };
        let root = cache_dir.join("store");
        let dir = root.join(LAYOUT_VERSION_DIR);
        let (dev, shared) = match fs_err::metadata(&dir) {
            Ok(meta) => (
                meta.dev(),
                fs_err::metadata(&root).is_ok_and(|root| root.mode() & 0o020 != 0),
            ),
            Err(_) => (0, false),
        };
        // The nearest directory that exists: what the store would sit on.
        let present = dir
            .ancestors()
            .find(|path| path.is_dir())
            .unwrap_or(Path::new("/"));
        let fs_kind = filesystem_kind(present)?;
        Ok(Store {
            host_id: crate::host::host_id(options.host_id.as_deref()),
            linker: Linker::new(options.link_mode.unwrap_or_default()),
            flush: false,
            fs_kind,
            dir_mode: 0o755,
            index_dir: None,
            index: OnceLock::new(),
            index_recreated: Mutex::new(None),
            temp_roots: Mutex::new(None),
            warnings: Mutex::new(Vec::new()),
            shared,
            verified: Mutex::new(std::collections::HashSet::new()),
            tree_stamps: Default::default(),
            full_verify: options.full_verify.into(),
            read_only: true,
            metas: Mutex::new(HashMap::new()),
            shards: Mutex::new(std::collections::HashSet::new()),
            link_caches: crate::stamps::LinkCaches::default(),
            flushes: Default::default(),
            cache_dir,
            root,
            dir,
            dev,
        })
    }

    /// Open (creating) the store of `cache_dir` (`$AGENTPACK_HOME/cache`); the store itself lives in
    /// `cache_dir/store/`.
    pub fn open(cache_dir: &Path, options: StoreOptions) -> Result<Store> {
        fs_err::create_dir_all(cache_dir).ctx("create", cache_dir)?;
        let cache_dir = fs_err::canonicalize(cache_dir).ctx("resolve", cache_dir)?;
        let root = cache_dir.join("store");
        create_dir_if_missing(&root, None)?;
        write_if_missing(&root.join("CACHEDIR.TAG"), CACHEDIR_TAG.as_bytes())?;
        write_if_missing(&root.join(".gitignore"), b"*\n")?;
        let root_meta = fs_err::metadata(&root).ctx("inspect", &root)?;
        let root_mode = root_meta.mode() & 0o7777;
        // Mutable directories follow the store root: when it is group-writable they are
        // group-writable, setgid and sticky (the `/tmp` rule, see docs/src/shared-store.md).
        let shared = root_mode & 0o020 != 0;
        let dir_mode = if shared {
            0o755 | fsutil::SHARED_DIR_BITS
        } else {
            0o755
        };
        let dir = root.join(LAYOUT_VERSION_DIR);
        let mut open_warnings = Vec::new();
        let mut mutable_dirs = vec![dir.clone()];
        mutable_dirs
            .extend([BLOBS, META, TMP, GCROOTS, TEMPROOTS, LEASES].map(|sub| dir.join(sub)));
        mutable_dirs.push(dir.join(GCROOTS).join(INDIRECT));
        mutable_dirs.push(dir.join(GCROOTS).join(GENERATIONS));
        if shared {
            // Every directory users share is made up front, so the administrator who opens the
            // store first owns them all: a directory's owner may remove anyone's entries in it.
            mutable_dirs.push(dir.join(GCROOTS).join(HOSTS));
            if options.index && !filesystem_kind(&root)?.remote {
                mutable_dirs.push(dir.join(INDEX));
            }
            mutable_dirs
                .extend((0..=255u8).map(|byte| dir.join(BLOBS).join(format!("{byte:02x}"))));
            mutable_dirs.push(cache_dir.join(REBUILDABLE_DIR));
        }
        let admin = root_meta.uid();
        let mut not_admins = Vec::new();
        for path in &mutable_dirs {
            create_dir_if_missing(path, Some(dir_mode))?;
            if shared {
                match make_sticky(path, admin)? {
                    SharedDir::Ok => {}
                    SharedDir::NotAdmins(owner) => not_admins.push((path.clone(), owner)),
                    SharedDir::NotSticky(warning) => open_warnings.push(warning),
                }
            }
        }
        if let Some((first, owner)) = not_admins.first() {
            open_warnings.push(format!(
                "warning: {} shared store directories (the first: {}) belong to uid {owner}, not to the store's owner (uid {admin}): their owner may remove or replace what anyone published in them; as root run `chown -R {admin} {}` on the directories (not the store paths), or re-create the store as docs/src/shared-store.md says",
                not_admins.len(),
                first.display(),
                dir.display()
            ));
        }
        let dev = fs_err::metadata(&dir).ctx("inspect", &dir)?.dev();
        let fs_kind = filesystem_kind(&dir)?;
        // In a shared store every user keeps an index of their own (`index/u<uid>/`, private): the
        // index is a cache another member must not be able to write into.
        let own_index = |base: PathBuf| {
            if shared {
                base.join(format!("u{}", fsutil::euid()))
            } else {
                base
            }
        };
        let index_dir = if !options.index {
            None
        } else if !fs_kind.remote {
            Some(own_index(dir.join(INDEX)))
        } else {
            options.local_cache_dir.as_ref().and_then(|local| {
                let local_remote = fs_err::create_dir_all(local)
                    .ok()
                    .and_then(|()| filesystem_kind(local).ok())
                    .is_none_or(|kind| kind.remote);
                if local_remote {
                    return None;
                }
                let key = blake3::hash(dir.as_os_str().as_encoded_bytes()).to_hex();
                Some(local.join(INDEX).join(&key[..32]))
            })
        };
        let host_id = crate::host::host_id(options.host_id.as_deref());
        Ok(Store {
            cache_dir,
            root,
            dir,
            dev,
            host_id,
            linker: Linker::new(options.link_mode.unwrap_or_default()),
            flush: options.flush,
            fs_kind,
            dir_mode,
            index_dir,
            index: OnceLock::new(),
            index_recreated: Mutex::new(None),
            temp_roots: Mutex::new(None),
            warnings: Mutex::new(open_warnings),
            shared,
            verified: Mutex::new(std::collections::HashSet::new()),
            tree_stamps: Default::default(),
            full_verify: options.full_verify.into(),
            read_only: false,
            metas: Mutex::new(HashMap::new()),
            shards: Mutex::new(std::collections::HashSet::new()),
            link_caches: crate::stamps::LinkCaches::default(),
            flushes: Default::default(),
        })
    }
}
