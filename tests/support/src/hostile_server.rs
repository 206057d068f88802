//! `HostileServer`: an HTTP server on 127.0.0.1 that speaks just enough of GitHub's REST API to be
//! asked for a repository, then misbehaves in one chosen way: it stalls, sends an endless body, a
//! gzip bomb, a tarball of very many tiny files, endless JSON, or endless pages of tags.
//!
//! Bodies are generated while they are sent (nothing endless is ever held in memory) and the server
//! stops writing as soon as the client goes away. [`run_measured`] runs a command and reports its
//! peak memory (its `VmHWM` while it runs, its `ru_maxrss` from `wait4`) so tests can assert that
//! agentpack stays small while it refuses. It never reaches beyond 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The commit every ref and tag of the hostile repository resolves to.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// How the server misbehaves. Every other endpoint answers normally (a small valid repository).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostility {
    /// Nothing misbehaves.
    None,
    /// The tarball answers its headers and a few bytes, then never sends another byte.
    StallTarball,
    /// The commit lookup never answers at all.
    StallCommits,
    /// The tarball body never ends (random-looking bytes, no length).
    EndlessTarball,
    /// The tarball is a gzip bomb: one file of this many zero bytes, compressed about 1000:1.
    GzipBomb(u64),
    /// The tarball holds this many one-byte files.
    ManyFiles(usize),
    /// Every JSON answer (commit lookups, tag pages, npm packuments at `/<name>`) never ends.
    EndlessJson,
    /// The tag list has a next page, always.
    EndlessTagPages,
    /// The tag list has this many full pages (100 tags each, none of them 9.x).
    ManyTags(usize),
}

#[derive(Debug, Default)]
struct Counters {
    requests: Mutex<Vec<String>>,
    tag_pages: AtomicUsize,
    tarball_bytes: AtomicUsize,
}

/// A running hostile server; stops when dropped.
#[derive(Debug)]
pub struct HostileServer {
    port: u16,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    accept: Option<JoinHandle<()>>,
}

impl HostileServer {
    /// Starts a server on a free port of 127.0.0.1 misbehaving as `hostility` says.
    pub fn start(hostility: Hostility) -> HostileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let accept = {
            let stop = Arc::clone(&stop);
            let counters = Arc::clone(&counters);
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let stop = Arc::clone(&stop);
                            let counters = Arc::clone(&counters);
                            std::thread::spawn(move || {
                                let _ = serve(stream, hostility, &stop, &counters);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        HostileServer {
            port,
            stop,
            counters,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:<port>`: both `AGENTPACK_GITHUB_API_URL` and `AGENTPACK_GITHUB_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Request lines received so far.
    pub fn requests(&self) -> Vec<String> {
        self.counters
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Tag pages served so far.
    pub fn tag_pages(&self) -> usize {
        self.counters.tag_pages.load(Ordering::SeqCst)
    }

    /// Tarball bytes written so far (compressed, as sent).
    pub fn tarball_bytes(&self) -> usize {
        self.counters.tarball_bytes.load(Ordering::SeqCst)
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve(
    stream: TcpStream,
    hostility: Hostility,
    stop: &AtomicBool,
    counters: &Counters,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    counters
        .requests
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(request_line.trim().to_owned());
    let target = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut out = stream;
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let stall = |out: &mut TcpStream| {
        let started = Instant::now();
        while !stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = out.flush();
    };
    match parts.as_slice() {
        ["repos", _, _, "commits", ..] => match hostility {
            Hostility::StallCommits => stall(&mut out),
            Hostility::EndlessJson => {
                head(&mut out, "application/json", None, &[])?;
                out.write_all(b"{\"sha\":\"")?;
                endless(&mut out, stop, |buf| buf.fill(b'a'))?;
            }
            _ => {
                let body = format!("{{\"sha\":\"{COMMIT}\"}}");
                head(&mut out, "application/json", Some(body.len()), &[])?;
                out.write_all(body.as_bytes())?;
            }
        },
        ["repos", owner, repo, "tags"] => match hostility {
            Hostility::EndlessJson => {
                head(&mut out, "application/json", None, &[])?;
                out.write_all(b"[")?;
                let tag = format!("{{\"name\":\"v1.0.0\",\"commit\":{{\"sha\":\"{COMMIT}\"}}}},");
                endless(&mut out, stop, |buf| {
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b = tag.as_bytes()[i % tag.len()];
                    }
                })?;
            }
            Hostility::EndlessTagPages | Hostility::ManyTags(_) => {
                let page: usize = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("page="))
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(1);
                counters.tag_pages.fetch_add(1, Ordering::SeqCst);
                let tags: Vec<String> = (0..100)
                    .map(|i| {
                        format!(
                            "{{\"name\":\"v0.{page}.{i}\",\"commit\":{{\"sha\":\"{COMMIT}\"}}}}"
                        )
                    })
                    .collect();
                let body = format!("[{}]", tags.join(","));
                let link = format!(
                    "Link: <http://127.0.0.1/repos/{owner}/{repo}/tags?per_page=100&page={}>; rel=\"next\"",
                    page + 1
                );
                let last = matches!(hostility, Hostility::ManyTags(pages) if page >= pages);
                let prev = format!(
                    "Link: <http://127.0.0.1/repos/{owner}/{repo}/tags?per_page=100&page={}>; rel=\"prev\"",
                    page.saturating_sub(1)
                );
                let extra: &[&str] = if last { &[&prev] } else { &[&link] };
                head(&mut out, "application/json", Some(body.len()), extra)?;
                out.write_all(body.as_bytes())?;
            }
            _ => {
                let body = format!("[{{\"name\":\"v1.0.0\",\"commit\":{{\"sha\":\"{COMMIT}\"}}}}]");
                head(&mut out, "application/json", Some(body.len()), &[])?;
                out.write_all(body.as_bytes())?;
            }
        },
        ["repos", _, _, "tarball", _] => {
            let mut counted = CountingWriter {
                inner: &mut out,
                counters,
            };
            match hostility {
                Hostility::StallTarball => {
                    head(counted.inner, "application/x-gzip", None, &[])?;
                    counted.write_all(&[0x1f, 0x8b, 8, 0])?;
                    counted.flush()?;
                    stall(counted.inner);
                }
                Hostility::EndlessTarball => {
                    head(counted.inner, "application/x-gzip", None, &[])?;
                    let mut state = 0x2545_f491_4f6c_dd1d_u64;
                    endless(&mut counted, stop, |buf| {
                        for b in buf.iter_mut() {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            *b = state as u8;
                        }
                    })?;
                }
                Hostility::GzipBomb(size) => {
                    head(counted.inner, "application/x-gzip", None, &[])?;
                    let mut gz =
                        flate2::write::GzEncoder::new(&mut counted, flate2::Compression::default());
                    gz.write_all(&dir_header("hostile-repo-0123456/"))?;
                    gz.write_all(&file_header("hostile-repo-0123456/bomb.bin", size))?;
                    let zeros = vec![0u8; 1 << 20];
                    let mut left = size.div_ceil(512) * 512;
                    while left > 0 && !stop.load(Ordering::SeqCst) {
                        let n = left.min(zeros.len() as u64);
                        gz.write_all(&zeros[..n as usize])?;
                        left -= n;
                    }
                    gz.write_all(&[0u8; 1024])?;
                    gz.finish()?;
                }
                Hostility::ManyFiles(count) => {
                    head(counted.inner, "application/x-gzip", None, &[])?;
                    let mut gz =
                        flate2::write::GzEncoder::new(&mut counted, flate2::Compression::fast());
                    gz.write_all(&dir_header("hostile-repo-0123456/"))?;
                    let mut block = [0u8; 512];
                    block[0] = b'x';
                    for index in 0..count {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        gz.write_all(&file_header(
                            &format!("hostile-repo-0123456/f{index:07}.md"),
                            1,
                        ))?;
                        gz.write_all(&block)?;
                    }
                    gz.write_all(&[0u8; 1024])?;
                    gz.finish()?;
                }
                _ => {
                    let bytes = small_tarball();
                    head(counted.inner, "application/x-gzip", Some(bytes.len()), &[])?;
                    counted.write_all(&bytes)?;
                }
            }
        }
        // Anything else is an npm packument: endless under `EndlessJson`.
        [name] if hostility == Hostility::EndlessJson && !name.ends_with(".git") => {
            head(&mut out, "application/json", None, &[])?;
            out.write_all(b"{\"name\":\"")?;
            endless(&mut out, stop, |buf| buf.fill(b'x'))?;
        }
        _ => {
            let body = b"not found";
            write!(
                out,
                "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            out.write_all(body)?;
        }
    }
    out.flush()
}

struct CountingWriter<'a> {
    inner: &'a mut TcpStream,
    counters: &'a Counters,
}

impl Write for CountingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.counters.tarball_bytes.fetch_add(n, Ordering::SeqCst);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn head(
    out: &mut TcpStream,
    content_type: &str,
    length: Option<usize>,
    extra: &[&str],
) -> std::io::Result<()> {
    let mut text =
        format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n");
    if let Some(length) = length {
        text.push_str(&format!("Content-Length: {length}\r\n"));
    }
    for line in extra {
        text.push_str(line);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    out.write_all(text.as_bytes())
}

/// Writes 64 KiB chunks filled by `fill` until the client goes away or the server stops.
fn endless(
    out: &mut impl Write,
    stop: &AtomicBool,
    mut fill: impl FnMut(&mut [u8]),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let started = Instant::now();
    while !stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(120) {
        fill(&mut buf);
        out.write_all(&buf)?;
    }
    Ok(())
}

fn header(name: &str, size: u64, kind: tar::EntryType) -> [u8; 512] {
    let mut header = tar::Header::new_gnu();
    header.set_path(name).unwrap();
    header.set_size(size);
    header.set_mode(if kind == tar::EntryType::Directory {
        0o755
    } else {
        0o644
    });
    header.set_entry_type(kind);
    header.set_mtime(0);
    header.set_cksum();
    let mut bytes = [0u8; 512];
    bytes.copy_from_slice(header.as_bytes());
    bytes
}

fn dir_header(name: &str) -> [u8; 512] {
    header(name, 0, tar::EntryType::Directory)
}

fn file_header(name: &str, size: u64) -> [u8; 512] {
    header(name, size, tar::EntryType::Regular)
}

/// A valid GitHub-style tarball: one skill.
pub fn small_tarball() -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let skill = b"---\nname: hostile\ndescription: a small skill\n---\nHello.\n";
    gz.write_all(&dir_header("hostile-repo-0123456/")).unwrap();
    gz.write_all(&file_header(
        "hostile-repo-0123456/SKILL.md",
        skill.len() as u64,
    ))
    .unwrap();
    let mut block = [0u8; 512];
    block[..skill.len()].copy_from_slice(skill);
    gz.write_all(&block).unwrap();
    gz.write_all(&[0u8; 1024]).unwrap();
    gz.finish().unwrap()
}

/// What [`run_measured`] saw.
#[derive(Debug)]
pub struct Measured {
    /// The command's output.
    pub output: Output,
    /// The child's peak resident memory in KiB: its last `VmHWM` reading, or its `ru_maxrss` from
    /// `wait4` when that is above this process's own peak (below it, it may be the copy `fork`
    /// made of this process before `exec`).
    pub peak_kib: u64,
    /// How long it ran.
    pub elapsed: Duration,
    /// Whether it had to be killed after `deadline`.
    pub killed: bool,
}

/// Runs `command` (stdout/stderr captured), polling its peak memory; kills it after `deadline`.
// The child is reaped with `wait4` (which std's `Child` cannot do), never left a zombie.
#[allow(clippy::zombie_processes)]
pub fn run_measured(command: &mut Command, deadline: Duration) -> Measured {
    let started = Instant::now();
    // The child's `ru_maxrss` starts at this process's RSS (fork copies it before exec); only a
    // value above that is the child's own peak.
    let parent_rss = rss_kib("self");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err_thread = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let mut peak = 0u64;
    let mut killed = false;
    let (status, rss) = loop {
        if let Some(hwm) = vm_hwm_kib(pid) {
            peak = peak.max(hwm);
        }
        if let Some(done) = reap(pid, false) {
            break done;
        }
        if started.elapsed() > deadline {
            killed = true;
            let _ = child.kill();
            break reap(pid, true).unwrap_or((std::process::ExitStatus::from_raw(9), 0));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    if rss > parent_rss {
        peak = peak.max(rss);
    }
    Measured {
        output: Output {
            status,
            stdout: out_thread.join().unwrap(),
            stderr: err_thread.join().unwrap(),
        },
        peak_kib: peak,
        elapsed,
        killed,
    }
}

fn rss_kib(process: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(u64::MAX)
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Reaps `pid` with `wait4` (blocking or not): its exit status and its own peak resident memory
/// (`ru_maxrss`, KiB; its reaped descendants included), or `None` while it runs.
#[expect(unsafe_code)]
fn reap(pid: u32, block: bool) -> Option<(std::process::ExitStatus, u64)> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut status: libc::c_int = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    let flags = if block { 0 } else { libc::WNOHANG };
    // SAFETY: `status` and `usage` point to writable memory of the right types; wait4 only writes
    // them. The pid is our own child, which std's `Child` never waits for after this.
    let reaped = unsafe { libc::wait4(pid, &mut status, flags, usage.as_mut_ptr()) };
    if reaped != pid {
        return None;
    }
    // SAFETY: wait4 reaped the child and filled `usage` (zeroed before).
    let usage = unsafe { usage.assume_init() };
    Some((
        std::process::ExitStatus::from_raw(status),
        u64::try_from(usage.ru_maxrss).unwrap_or(0),
    ))
}
