//! Which archive entries extraction wants, skips or refuses: the paths packages need, tar metadata
//! headers, and entry kinds no package may hold.
//!
//! Pure predicates: it never reads or writes files.

use std::io::Read;

use tar::EntryType;

use super::ExtractError;

/// Whether the repository-relative `path` is needed to copy out the packages at `paths`
/// (repository-relative, `""` for the whole repository): inside one of them, or a directory on the
/// way to one (so a link on the way is seen), or one of the catalog files normalization reads at
/// the root ([`crate::marketplace::CATALOG_FILES`]).
pub fn needed_for(paths: &[String], path: &str) -> bool {
    let path = path.trim_end_matches('/');
    paths.iter().any(|wanted| {
        let wanted = wanted.trim_matches('/');
        wanted.is_empty()
            || path == wanted
            || path
                .strip_prefix(wanted)
                .is_some_and(|rest| rest.starts_with('/'))
            || wanted
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
    }) || crate::marketplace::CATALOG_FILES.iter().any(|catalog| {
        *catalog == path
            || catalog
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Pax and GNU long-name headers: tar reads them into the next entry, there is nothing to write.
pub(crate) fn is_metadata_entry(kind: EntryType) -> bool {
    matches!(
        kind,
        EntryType::XGlobalHeader
            | EntryType::XHeader
            | EntryType::GNULongName
            | EntryType::GNULongLink
    )
}

/// The refusal of an entry no package may hold: a hard link, a device, a FIFO, a sparse file or an
/// unknown type (`None` for files, directories and symbolic links).
pub(super) fn refused_kind<R: Read>(
    entry: &tar::Entry<'_, R>,
    full_name: String,
) -> Option<ExtractError> {
    let kind = match entry.header().entry_type() {
        EntryType::Directory | EntryType::Regular | EntryType::Continuous | EntryType::Symlink => {
            return None
        }
        EntryType::Link => {
            let target = entry
                .link_name_bytes()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            return Some(ExtractError::HardLink {
                name: full_name,
                target,
            });
        }
        EntryType::Char => "character device".to_owned(),
        EntryType::Block => "block device".to_owned(),
        EntryType::Fifo => "FIFO".to_owned(),
        EntryType::GNUSparse => "sparse file".to_owned(),
        unknown => format!("type {:?}", unknown.as_byte() as char),
    };
    Some(ExtractError::SpecialFile {
        name: full_name,
        kind,
    })
}
