//! Talking to a Codex app-server daemon the way an IDE does, and a stand-in daemon.
//!
//! [`DaemonClient`] speaks JSON-RPC over a WebSocket on a home's
//! `app-server-control/app-server-control.sock` (checked with Codex 0.171.0); tests use it to load
//! a thread in a real daemon. [`StandInDaemon`] answers `initialize` and `thread/loaded/list` with
//! the threads it is given (two per page, to exercise the cursor) and shuts down when the file
//! `<home>/stand-in-stop` appears, which is what a stand-in `codex app-server daemon stop` writes.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tungstenite::Message;

/// The control socket of a Codex home.
pub fn control_socket(home: &Path) -> PathBuf {
    home.join("app-server-control/app-server-control.sock")
}

/// An initialized JSON-RPC connection to a daemon.
pub struct DaemonClient {
    socket: tungstenite::WebSocket<UnixStream>,
    next_id: u64,
}

impl DaemonClient {
    pub fn connect(home: &Path) -> Self {
        let stream = UnixStream::connect(control_socket(home)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (socket, _) = tungstenite::client("ws://localhost/", stream).unwrap();
        let mut client = Self { socket, next_id: 1 };
        client.call(
            "initialize",
            json!({"clientInfo": {"name": "agentpack-tests", "version": "0"}}),
        );
        client
    }

    /// Sends a request and returns its `result` (panics on an error answer).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.socket
            .send(Message::text(request.to_string()))
            .unwrap();
        loop {
            let Message::Text(text) = self.socket.read().unwrap() else {
                continue;
            };
            let value: Value = serde_json::from_str(text.as_str()).unwrap();
            if value.get("id") == Some(&json!(id)) {
                assert!(value.get("error").is_none(), "{method} failed: {value}");
                return value["result"].clone();
            }
        }
    }
}

/// A stand-in daemon on a home's control socket.
pub struct StandInDaemon {
    pub home: PathBuf,
    /// How many connections it answered.
    pub connections: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandInDaemon {
    /// Listens on `<home>/app-server-control/app-server-control.sock`, reporting `threads` loaded.
    pub fn start(home: &Path, threads: &[&str]) -> Self {
        std::fs::create_dir_all(home.join("app-server-control")).unwrap();
        let listener = UnixListener::bind(control_socket(home)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let threads: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        let stop = home.join("stand-in-stop");
        let socket_path = control_socket(home);
        let thread = std::thread::spawn(move || loop {
            if stop.exists() {
                drop(listener);
                let _ = std::fs::remove_file(&socket_path);
                return;
            }
            match listener.accept() {
                Ok((stream, _)) => {
                    counter.fetch_add(1, Ordering::SeqCst);
                    stream.set_nonblocking(false).unwrap();
                    serve(stream, &threads);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        });
        Self {
            home: home.to_path_buf(),
            connections,
            thread: Some(thread),
        }
    }
}

impl Drop for StandInDaemon {
    fn drop(&mut self) {
        let _ = std::fs::create_dir_all(&self.home);
        let _ = std::fs::write(self.home.join("stand-in-stop"), "");
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(stream: UnixStream, threads: &[String]) {
    let Ok(mut socket) = tungstenite::accept(stream) else {
        return;
    };
    while let Ok(message) = socket.read() {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(request) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        let result = match request["method"].as_str() {
            Some("initialize") => {
                json!({"userAgent": "stand-in", "codexHome": "", "platformFamily": "unix", "platformOs": "linux"})
            }
            Some("thread/loaded/list") => {
                let start: usize = request["params"]["cursor"]
                    .as_str()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let end = (start + 2).min(threads.len());
                let next = if end < threads.len() {
                    json!(end.to_string())
                } else {
                    Value::Null
                };
                json!({"data": threads[start..end], "nextCursor": next})
            }
            _ => {
                let answer = json!({"id": request["id"], "error": {"code": -32601, "message": "unknown method"}});
                let _ = socket.send(Message::text(answer.to_string()));
                continue;
            }
        };
        // A notification first, as the real daemon sends, which a client must skip.
        let _ = socket.send(Message::text(
            json!({"method": "configWarning", "params": {}}).to_string(),
        ));
        let answer = json!({"id": request["id"], "result": result});
        if socket.send(Message::text(answer.to_string())).is_err() {
            return;
        }
    }
}

/// Runs `command` (a `codex app-server`, possibly through `agentpack codex`), which speaks
/// JSON-RPC as JSON lines on stdio, asks it one `method` and returns the `result`.
pub fn ask_app_server(mut command: std::process::Command, method: &str, params: Value) -> Value {
    use std::io::{BufRead, Write};
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "agentpack-tests", "version": "0"}}}),
        json!({"method": "initialized"}),
        json!({"id": 2, "method": method, "params": params}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answer = None;
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if value.get("id") == Some(&json!(2)) {
            answer = Some(value);
            break;
        }
    }
    // End of input ends the app server; whatever runs it (a launcher) then finishes its own work.
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();
    let answer = answer.unwrap_or_else(|| panic!("codex app-server did not answer {method}"));
    assert!(answer.get("error").is_none(), "{method} failed: {answer}");
    answer["result"].clone()
}
