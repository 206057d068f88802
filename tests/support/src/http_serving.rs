//! `Serving`: the request loop of the tiny_http test servers ([`crate::FakeGitHub`],
//! [`crate::NpmRegistry`]): one thread receives requests and answers each on a thread of its own.
//!
//! A fixed pool of workers would let requests that block (a body the client has not sent yet, a
//! response the client reads only after its next request) starve a new connection until the
//! client's read timeout; a thread per request never makes one request wait for another.
//! Dropping the value stops receiving and joins every request still being answered.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Request, Server};

/// A running request loop; see the module docs.
pub(crate) struct Serving {
    server: Arc<Server>,
    stopping: Arc<AtomicBool>,
    receiver: Option<JoinHandle<()>>,
}

impl Serving {
    /// Serves `server`, answering every request with `handle` on its own thread.
    pub(crate) fn start(
        server: Server,
        handle: impl Fn(Request) + Send + Sync + 'static,
    ) -> Serving {
        let server = Arc::new(server);
        let stopping = Arc::new(AtomicBool::new(false));
        let receiver = {
            let server = Arc::clone(&server);
            let stopping = Arc::clone(&stopping);
            let handle = Arc::new(handle);
            std::thread::spawn(move || {
                let mut answering: Vec<JoinHandle<()>> = Vec::new();
                loop {
                    match server.recv() {
                        Ok(request) => {
                            let handle = Arc::clone(&handle);
                            let thread = std::thread::spawn(move || handle(request));
                            answering.retain(|thread| !thread.is_finished());
                            answering.push(thread);
                        }
                        Err(_) if stopping.load(Ordering::SeqCst) => break,
                        Err(_) => continue,
                    }
                }
                for thread in answering {
                    let _ = thread.join();
                }
            })
        };
        Serving {
            server,
            stopping,
            receiver: Some(receiver),
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(receiver) = self.receiver.take() {
            let _ = receiver.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use tiny_http::{Response, Server};

    use super::Serving;

    fn get(port: u16, path: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    }

    /// More requests that wait than any fixed pool holds must not keep the one that frees them out.
    #[test]
    fn a_request_is_answered_while_more_requests_wait_than_a_pool_would_hold() {
        let server = Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let released = Arc::new(AtomicBool::new(false));
        let _serving = Serving::start(server, {
            let released = Arc::clone(&released);
            move |request| {
                if request.url() == "/release" {
                    released.store(true, Ordering::SeqCst);
                } else {
                    let started = std::time::Instant::now();
                    while !released.load(Ordering::SeqCst) {
                        assert!(
                            started.elapsed() < Duration::from_secs(20),
                            "never released"
                        );
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                let _ = request.respond(Response::from_string("done"));
            }
        });
        let waiting: Vec<_> = (0..12)
            .map(|_| std::thread::spawn(move || get(port, "/wait")))
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let release = get(port, "/release").expect("the releasing request was answered");
        assert!(release.ends_with("done"), "{release}");
        for request in waiting {
            let answer = request.join().unwrap().unwrap();
            assert!(answer.ends_with("done"), "{answer}");
        }
    }
}
