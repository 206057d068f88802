//! Hand-crafted tar archives, including malicious ones the `tar` crate's builder would refuse to write.
//!
//! Names and link targets are raw bytes written straight into ustar headers, so tests can produce
//! `../` escapes, absolute paths, non-UTF-8 names, hard links, devices, FIFOs and entries whose declared
//! size runs past the end of the archive.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{EntryType, Header};

/// Builds a tar archive entry by entry.
#[derive(Debug, Default)]
pub struct RawTar {
    bytes: Vec<u8>,
}

fn header(name: &[u8], kind: EntryType, size: u64, mode: u32, link: &[u8]) -> Header {
    let mut header = Header::new_ustar();
    {
        let old = header.as_old_mut();
        assert!(
            name.len() <= 100 && link.len() <= 100,
            "raw names are limited to 100 bytes"
        );
        old.name[..name.len()].copy_from_slice(name);
        old.linkname[..link.len()].copy_from_slice(link);
    }
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_cksum();
    header
}

impl RawTar {
    /// An empty archive.
    pub fn new() -> RawTar {
        RawTar::default()
    }

    fn push(mut self, header: &Header, data: &[u8]) -> RawTar {
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(data);
        let padding = (512 - data.len() % 512) % 512;
        self.bytes.extend(std::iter::repeat_n(0u8, padding));
        self
    }

    /// A directory entry.
    pub fn dir(self, name: impl AsRef<[u8]>) -> RawTar {
        let h = header(name.as_ref(), EntryType::Directory, 0, 0o755, b"");
        self.push(&h, b"")
    }

    /// A regular file with `mode`.
    pub fn file_mode(self, name: impl AsRef<[u8]>, data: impl AsRef<[u8]>, mode: u32) -> RawTar {
        let data = data.as_ref();
        let h = header(
            name.as_ref(),
            EntryType::Regular,
            data.len() as u64,
            mode,
            b"",
        );
        self.push(&h, data)
    }

    /// A regular file, mode 0644.
    pub fn file(self, name: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> RawTar {
        self.file_mode(name, data, 0o644)
    }

    /// A symbolic link `name -> target`.
    pub fn symlink(self, name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> RawTar {
        let h = header(name.as_ref(), EntryType::Symlink, 0, 0o777, target.as_ref());
        self.push(&h, b"")
    }

    /// A hard link `name` to the earlier entry `target`.
    pub fn hardlink(self, name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> RawTar {
        let h = header(name.as_ref(), EntryType::Link, 0, 0o644, target.as_ref());
        self.push(&h, b"")
    }

    /// An entry of any other type (character/block device, FIFO...) without data.
    pub fn special(self, name: impl AsRef<[u8]>, kind: EntryType) -> RawTar {
        let h = header(name.as_ref(), kind, 0, 0o644, b"");
        self.push(&h, b"")
    }

    /// A regular file whose header declares `declared` bytes but whose data is `data`, after which the
    /// archive ends (no padding, no end-of-archive blocks).
    pub fn truncated_file(
        mut self,
        name: impl AsRef<[u8]>,
        declared: u64,
        data: impl AsRef<[u8]>,
    ) -> Vec<u8> {
        let h = header(name.as_ref(), EntryType::Regular, declared, 0o644, b"");
        self.bytes.extend_from_slice(h.as_bytes());
        self.bytes.extend_from_slice(data.as_ref());
        self.bytes
    }

    /// The archive bytes, with the two zero blocks that end a tar.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.extend(std::iter::repeat_n(0u8, 1024));
        self.bytes
    }

    /// The archive, gzip-compressed.
    pub fn finish_gz(self) -> Vec<u8> {
        gzip(&self.finish())
    }
}

/// Gzip-compresses `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}
