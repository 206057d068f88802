//! Overhead of `agentpack --proxy claude` on streamed responses (run with `bench/proxy.sh`, or
//! `cargo bench -p agentpack-cli --bench proxy -- --bench`).
//!
//! A fake upstream on 127.0.0.1 streams server-sent events as fast as it can write them (each
//! event its own HTTP chunk). The stand-in `claude` started by the launcher is this bench binary
//! (`--standin`): it sends the same streamed request alternately straight to the upstream and to
//! the proxy's `ANTHROPIC_BASE_URL`, and times the first body byte and the whole response of each.
//! Three streams: a typical reply (200 events, ~25 KB) and a long one (20,000 events, ~2.5 MB),
//! both written back to back (the proxy's worst case: its cost per event shows), and 100 events
//! 2 ms apart, closer to a model streaming tokens. Each request opens a new connection on both
//! sides. Measures only with `--bench` in argv, so
//! `cargo test --benches` builds it and returns at once. Prints a Markdown table for
//! `docs/src/proxy.md`; asserts nothing.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use agentpack_test_support::IsolatedHome;

mod support;
use support::runs;

/// (label, events, microseconds between events; 0 = as fast as the upstream can write).
const SIZES: [(&str, usize, u64); 3] = [
    ("typical reply, 200 events, back to back", 200, 0),
    ("long reply, 20,000 events, back to back", 20_000, 0),
    (
        "paced reply, 100 events 2 ms apart (model speed)",
        100,
        2_000,
    ),
];

fn event(i: usize) -> String {
    format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"token {i:06} of a streamed reply\"}}}}\n\n"
    )
}

/// Streams `?events=N` events, then ends the response and closes.
fn serve(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let query = |name: &str| -> u64 {
        line.split(&format!("{name}="))
            .nth(1)
            .and_then(|s| s.split([' ', '&']).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let events = query("events") as usize;
    let gap = Duration::from_micros(query("gap_us"));
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        if header.trim().is_empty() {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    let _ = stream.set_nodelay(true);
    let mut out = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nrequest-id: req_bench\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    for i in 0..events {
        let e = event(i);
        out.push_str(&format!("{:x}\r\n{e}\r\n", e.len()));
        if !gap.is_zero() {
            if stream.write_all(out.as_bytes()).is_err() {
                return;
            }
            out.clear();
            std::thread::sleep(gap);
        } else if out.len() > 16 * 1024 {
            if stream.write_all(out.as_bytes()).is_err() {
                return;
            }
            out.clear();
        }
    }
    out.push_str("0\r\n\r\n");
    let _ = stream.write_all(out.as_bytes());
}

/// One streamed request: (time to the first body byte, time to the end).
fn call(base: &str, events: usize, gap_us: u64) -> (Duration, Duration) {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let body = r#"{"model":"claude-bench","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let started = Instant::now();
    let mut stream = TcpStream::connect(host).unwrap();
    stream.set_nodelay(true).unwrap();
    write!(
        stream,
        "POST /v1/messages?events={events}&gap_us={gap_us} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\nx-api-key: sk-ant-bench\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
    }
    let mut first = None;
    let mut total = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let size = usize::from_str_radix(line.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let mut chunk = vec![0u8; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        first.get_or_insert_with(|| started.elapsed());
        total += size;
    }
    assert!(total > 0);
    (first.unwrap_or_default(), started.elapsed())
}

/// The stand-in `claude`: interleaved direct and proxied calls, results written to `BENCH_OUT`.
fn standin() {
    let proxy = std::env::var("ANTHROPIC_BASE_URL").unwrap();
    let direct = std::env::var("BENCH_UPSTREAM").unwrap();
    let mut out = String::new();
    for (index, (_, events, gap)) in SIZES.iter().enumerate() {
        // Warm-up.
        call(&direct, *events, *gap);
        call(&proxy, *events, *gap);
        for _ in 0..runs(31) {
            for (side, base) in [("direct", &direct), ("proxy", &proxy)] {
                let (ttfb, total) = call(base, *events, *gap);
                out.push_str(&format!(
                    "{index} {side} {} {}\n",
                    ttfb.as_micros(),
                    total.as_micros()
                ));
            }
        }
    }
    std::fs::write(std::env::var("BENCH_OUT").unwrap(), out).unwrap();
}

fn median(mut samples: Vec<u128>) -> f64 {
    samples.sort_unstable();
    samples[samples.len() / 2] as f64 / 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--standin") {
        return standin();
    }
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    let home = IsolatedHome::new();
    std::fs::write(
        home.project.join("agentpack.toml"),
        "name = \"bench\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let root = home.project.parent().unwrap().to_path_buf();
    let claude = root.join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\nexec '{}' --standin\n",
            std::env::current_exe().unwrap().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let results = root.join("results.txt");
    let logs = root.join("proxy-logs");
    let output = home
        .command(&support::bin(), None)
        .args(["--proxy", "claude"])
        .env("CLAUDE_PATH", &claude)
        .env("ANTHROPIC_BASE_URL", &upstream)
        .env("BENCH_UPSTREAM", &upstream)
        .env("BENCH_OUT", &results)
        .env("AGENTPACK_PROXY_LOG_DIR", &logs)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&results).unwrap();
    let lines = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum::<usize>();
    println!(
        "{} runs per side per size, interleaved; {lines} proxy log lines written\n",
        runs(31)
    );
    println!("| streamed response | direct: first byte / whole | through the proxy: first byte / whole | ratio (whole) | added (whole) |");
    println!("| --- | --- | --- | --- | --- |");
    for (index, (label, _, _)) in SIZES.iter().enumerate() {
        let pick = |side: &str, column: usize| -> Vec<u128> {
            text.lines()
                .filter_map(|l| {
                    let parts: Vec<&str> = l.split(' ').collect();
                    (parts[0] == index.to_string() && parts[1] == side)
                        .then(|| parts[column].parse().unwrap())
                })
                .collect()
        };
        let (d_first, d_total) = (median(pick("direct", 2)), median(pick("direct", 3)));
        let (p_first, p_total) = (median(pick("proxy", 2)), median(pick("proxy", 3)));
        println!(
            "| {label} | {d_first:.2} ms / {d_total:.2} ms | {p_first:.2} ms / {p_total:.2} ms | {:.2}x | {:.2} ms |",
            p_total / d_total,
            p_total - d_total
        );
    }
}
