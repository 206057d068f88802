//! Keeping a downloaded snapshot in the store as a repo snapshot store path, and restoring it on a
//! later use, its archive's BLAKE3 checked against the record while it is extracted.
//!
//! It never uses a kept snapshot whose archive no longer matches its record, and never keeps the
//! tree as files (they would share inodes with package store paths).

use std::path::Path;

use agentpack_store::{StagedBuilt, Store};

use crate::extract::{self, ExtractReport};
use crate::github::RepoId;

use super::record::{SnapshotRecord, SNAPSHOT_RECORD_VERSION};
use super::{
    snapshot_name, FetchedVia, RepoSnapshot, SNAPSHOT_ARCHIVE, SNAPSHOT_RECORD, SNAPSHOT_TARBALL,
};

/// A kept snapshot looked up in the store.
pub(super) enum Kept {
    /// Verified: use it.
    Usable(RepoSnapshot),
    /// Not in the store.
    Missing,
    /// In the store but not usable (why); a fresh download is not kept under its name.
    Damaged(String),
}

/// The kept snapshot of `repo` at `commit`, extracted into `scratch`, if the store has one that
/// still matches its record.
pub(super) fn load_kept(
    store: &Store,
    repo: &RepoId,
    commit: &str,
    scratch: &Path,
    limits: &crate::limits::Limits,
) -> Kept {
    let name = snapshot_name(repo, commit);
    let Some(path) = store.get(&name) else {
        return Kept::Missing;
    };
    // A temp root first, so a concurrent `gc` cannot take it while this command reads it; if `gc`
    // took it before, the checks below fail and it is downloaded again.
    if store.add_temp_root(&path).is_err() {
        return Kept::Missing;
    }
    let record_path = path.path().join(SNAPSHOT_RECORD);
    let record: SnapshotRecord = match fs_err::read(&record_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(record) => record,
        Err(_) if !path.path().exists() => return Kept::Missing,
        Err(reason) => return Kept::Damaged(format!("{}: {reason}", record_path.display())),
    };
    if record.version != SNAPSHOT_RECORD_VERSION
        || record.repo != repo.key()
        || record.commit != commit.to_ascii_lowercase()
    {
        return Kept::Damaged(format!(
            "{} describes another snapshot",
            record_path.display()
        ));
    }
    let tarball = match record.archive.as_str() {
        SNAPSHOT_TARBALL => true,
        SNAPSHOT_ARCHIVE => false,
        other => {
            return Kept::Damaged(format!(
                "{} names an unknown archive {other:?}",
                record_path.display()
            ))
        }
    };
    let archive = path.path().join(&record.archive);
    let root = scratch.join(format!(
        "kept-{}-{}-{}",
        repo.owner.to_ascii_lowercase(),
        repo.repo.to_ascii_lowercase(),
        commit.to_ascii_lowercase()
    ));
    if root.exists() && fs_err::remove_dir_all(&root).is_err() {
        return Kept::Damaged(format!("cannot clear {}", root.display()));
    }
    let what = format!("the kept snapshot of github.com/{repo}");
    let extracted = fs_err::File::open(&archive)
        .map_err(|e| e.to_string())
        .and_then(|file| {
            let mut hashed = Blake3Tee::new(std::io::BufReader::new(file));
            // A tarball is extracted by the rules of a fresh download, which report its
            // executables and emptied links again; the tar+zstd of a git fetch holds the tree.
            let report = if tarball {
                Some(
                    extract::extract_github_tarball_limited(&mut hashed, &root, limits)
                        .map_err(|e| e.to_string())?,
                )
            } else {
                crate::oci::archive::read_tree(
                    &mut hashed,
                    crate::oci::archive::Compression::Zstd,
                    &root,
                    limits,
                    &what,
                )
                .map_err(|e| e.to_string())?;
                None
            };
            // Bytes after the end of the archive count too.
            let digest = hashed.read_to_end_hash().map_err(|e| e.to_string())?;
            Ok((digest, report))
        });
    // `Some(reason)` when the archive is not the one recorded.
    let mut extracted_report = None;
    let changed = extracted.map(|(digest, report)| {
        extracted_report = report;
        let recorded = &record.archive_blake3;
        (digest.to_hex().as_str() != recorded).then(|| {
            format!(
                "{} hashes to blake3:{}, not the recorded blake3:{recorded}",
                archive.display(),
                digest.to_hex()
            )
        })
    });
    match changed {
        Ok(None) => {}
        Ok(Some(reason)) => {
            let _ = fs_err::remove_dir_all(&root);
            return Kept::Damaged(reason);
        }
        Err(_) if !path.path().exists() => return Kept::Missing,
        Err(error) => {
            let _ = fs_err::remove_dir_all(&root);
            return Kept::Damaged(format!("{}: {error}", archive.display()));
        }
    }
    Kept::Usable(RepoSnapshot {
        repo: repo.clone(),
        commit: commit.to_ascii_lowercase(),
        root,
        via: if record.via == "git" {
            FetchedVia::GitProtocol
        } else {
            FetchedVia::Tarball
        },
        report: extracted_report.unwrap_or(ExtractReport {
            files: record.files,
            links_kept: record.links_kept,
            links_emptied: record.links_emptied,
            executables: record.executables,
        }),
        only: None,
    })
}

/// Whether `snapshot` holds every path of `paths` (`None`: the whole repository).
pub(super) fn covers(snapshot: &RepoSnapshot, paths: Option<&[String]>) -> bool {
    match (&snapshot.only, paths) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(only), Some(paths)) => paths.iter().all(|path| {
            let path = path.trim_matches('/');
            only.iter().any(|extracted| {
                extracted.is_empty()
                    || path == extracted
                    || path
                        .strip_prefix(extracted.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
        }),
    }
}

/// Stages `downloaded` as the repo snapshot store path of its (repo, commit)
/// ([`Store::stage_built`]: built and sealed, named by [`Store::place_built`] after the next flush),
/// or says why it could not be kept: `tarball` (what the download came from, with its BLAKE3 when
/// the extraction took it on the way; else the file is read again for it) moved in as
/// [`SNAPSHOT_TARBALL`], else (a git fetch, always the whole tree) the tree packed as
/// [`SNAPSHOT_ARCHIVE`].
pub(super) fn keep(
    store: &Store,
    downloaded: &RepoSnapshot,
    tarball: Option<(&Path, Option<blake3::Hash>)>,
) -> Result<StagedBuilt, String> {
    let name = snapshot_name(&downloaded.repo, &downloaded.commit);
    store
        .stage_built(&name, &[], |out, _final_path| {
            let (archive, digest) = match tarball {
                Some((tarball, digest)) => {
                    let archive = out.join(SNAPSHOT_TARBALL);
                    fs_err::rename(tarball, &archive)?;
                    let digest = match digest {
                        Some(digest) => digest,
                        None => Blake3Tee::new(fs_err::File::open(&archive)?).read_to_end_hash()?,
                    };
                    (SNAPSHOT_TARBALL, digest)
                }
                None => {
                    let archive = out.join(SNAPSHOT_ARCHIVE);
                    let file = std::io::BufWriter::new(fs_err::File::create(&archive)?);
                    let mut encoder =
                        zstd::Encoder::new(Blake3Tee::new(file), crate::oci::archive::ZSTD_LEVEL)?;
                    encoder.include_checksum(false)?;
                    crate::oci::archive::write_tar(
                        &downloaded.root,
                        &downloaded.report.executables,
                        &mut encoder,
                    )?;
                    let mut hashed = encoder.finish()?;
                    std::io::Write::flush(&mut hashed)?;
                    (SNAPSHOT_ARCHIVE, hashed.hasher.finalize())
                }
            };
            let record = SnapshotRecord {
                version: SNAPSHOT_RECORD_VERSION,
                repo: downloaded.repo.key(),
                commit: downloaded.commit.to_ascii_lowercase(),
                via: match downloaded.via {
                    FetchedVia::Tarball => "tarball".to_owned(),
                    FetchedVia::GitProtocol => "git".to_owned(),
                },
                archive: archive.to_owned(),
                archive_blake3: digest.to_hex().to_string(),
                links_emptied: downloaded.report.links_emptied.clone(),
                executables: downloaded.report.executables.clone(),
                files: downloaded.report.files,
                links_kept: downloaded.report.links_kept,
            };
            fs_err::write(out.join(SNAPSHOT_RECORD), serde_json::to_vec(&record)?)?;
            Ok(())
        })
        .map_err(|error| error.to_string())
}

/// Bytes read or written through it, hashed with BLAKE3 on the way (a kept snapshot's archive).
pub(super) struct Blake3Tee<T> {
    inner: T,
    hasher: blake3::Hasher,
}

impl<T> Blake3Tee<T> {
    pub(super) fn new(inner: T) -> Self {
        Blake3Tee {
            inner,
            hasher: blake3::Hasher::new(),
        }
    }
}

impl<R: std::io::Read> Blake3Tee<R> {
    /// Reads what is left (an extraction may stop before the end of its archive) and gives the
    /// BLAKE3 of every byte read through it.
    pub(super) fn read_to_end_hash(mut self) -> std::io::Result<blake3::Hash> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok(self.hasher.finalize())
    }
}

impl<R: std::io::Read> std::io::Read for Blake3Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

impl<W: std::io::Write> std::io::Write for Blake3Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt as _;

    use agentpack_store::StoreOptions;

    use super::*;

    fn scratch_snapshot(dir: &Path, repo: &RepoId) -> RepoSnapshot {
        let root = dir.join("extracted");
        fs_err::create_dir_all(root.join("skills/a")).unwrap();
        fs_err::write(root.join("skills/a/SKILL.md"), "---\nname: a\n---\nA.\n").unwrap();
        fs_err::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("skills/a", root.join("link")).unwrap();
        RepoSnapshot {
            repo: repo.clone(),
            commit: "ABCDEF0123456789abcdef0123456789abcdef01".to_owned(),
            root,
            via: FetchedVia::Tarball,
            report: ExtractReport {
                files: 2,
                links_kept: 1,
                links_emptied: vec!["skills/a/outside".to_owned()],
                executables: BTreeSet::from(["run.sh".to_owned()]),
            },
            only: None,
        }
    }

    #[test]
    fn a_kept_snapshot_is_found_by_repo_and_commit_and_a_changed_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let scratch = dir.path().join("scratch");
        fs_err::create_dir_all(&scratch).unwrap();
        let limits = crate::limits::Limits::default();
        let repo = RepoId::new("Acme", "Big");
        let commit = "abcdef0123456789abcdef0123456789abcdef01";
        let load = |repo: &RepoId, commit: &str| load_kept(&store, repo, commit, &scratch, &limits);
        assert!(matches!(load(&repo, commit), Kept::Missing));

        let downloaded = scratch_snapshot(dir.path(), &repo);
        store
            .place_built(keep(&store, &downloaded, None).unwrap())
            .unwrap();
        let kept_path = store.get(&snapshot_name(&repo, commit)).unwrap();
        // One archive, no file of the tree: nothing shares an inode with a package's blobs.
        let mut names: Vec<String> = fs_err::read_dir(kept_path.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec![SNAPSHOT_RECORD, SNAPSHOT_ARCHIVE]);
        // Any case of the commit and the names finds it; another commit does not.
        let Kept::Usable(kept) = load(&RepoId::new("acme", "big"), &commit.to_ascii_uppercase())
        else {
            panic!("the kept snapshot is usable");
        };
        assert!(kept.root.starts_with(&scratch));
        assert_eq!(
            fs_err::read_to_string(kept.root.join("skills/a/SKILL.md")).unwrap(),
            "---\nname: a\n---\nA.\n"
        );
        assert_eq!(
            fs_err::read_link(kept.root.join("link")).unwrap(),
            Path::new("skills/a")
        );
        assert_eq!(
            kept.report.links_emptied,
            vec!["skills/a/outside".to_owned()]
        );
        assert!(kept.report.executables.contains("run.sh"));
        assert!(matches!(
            load(&repo, "1111111111111111111111111111111111111111"),
            Kept::Missing
        ));

        // A record without the archive's digest (an older layout) is not used.
        fs_err::set_permissions(kept_path.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let record_path = kept_path.path().join(SNAPSHOT_RECORD);
        let recorded = fs_err::read(&record_path).unwrap();
        let mut legacy: serde_json::Value = serde_json::from_slice(&recorded).unwrap();
        assert!(legacy["archive_blake3"].is_string(), "{legacy}");
        legacy.as_object_mut().unwrap().remove("archive_blake3");
        let write_record = |bytes: &[u8]| {
            let _ = fs_err::remove_file(&record_path);
            fs_err::write(&record_path, bytes).unwrap();
        };
        write_record(&serde_json::to_vec(&legacy).unwrap());
        assert!(matches!(load(&repo, commit), Kept::Damaged(_)));
        write_record(&recorded);
        assert!(matches!(load(&repo, commit), Kept::Usable(_)));

        // The archive replaced by another tree's: not usable.
        let other = dir.path().join("other");
        fs_err::create_dir_all(&other).unwrap();
        fs_err::write(other.join("SKILL.md"), "changed").unwrap();
        let forged = crate::oci::archive::tree_tar_zstd(&other, &BTreeSet::new()).unwrap();
        let archive = kept_path.path().join(SNAPSHOT_ARCHIVE);
        fs_err::remove_file(&archive).unwrap();
        fs_err::write(&archive, forged).unwrap();
        match load(&repo, commit) {
            Kept::Damaged(reason) => assert!(reason.contains("hashes to blake3:"), "{reason}"),
            _ => panic!("a changed snapshot is refused"),
        }
        // And one that is no archive at all.
        fs_err::write(&archive, "not zstd").unwrap();
        assert!(matches!(load(&repo, commit), Kept::Damaged(_)));
        fs_err::set_permissions(kept_path.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
}
