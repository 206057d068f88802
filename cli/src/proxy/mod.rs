//! `agentpack --proxy claude`: a local diagnostics proxy between Claude Code and its API.
//!
//! [`start`] binds 127.0.0.1 on an ephemeral port and serves on one background thread with its
//! own single-threaded tokio runtime; the launcher points the agent's `ANTHROPIC_BASE_URL` at
//! [`RunningProxy::base_url`] and calls [`RunningProxy::stop`] when the agent has exited. Requests
//! are forwarded unchanged (see `forward`), WebSockets tunnelled (see `ws`), and each one leaves a
//! sanitized JSONL line (see `log`, `sanitize`, `observe`). Settings come from `config`.
//!
//! Nothing here runs unless `--proxy` was given: a plain launch starts no runtime and no thread.
//! The proxy never prints; the launcher says where the log is.

pub mod config;
mod forward;
mod log;
mod observe;
mod sanitize;
mod ws;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_platform_verifier::BuilderVerifierExt as _;

pub use config::ProxyConfig;
use config::Transport;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen on 127.0.0.1 for the Claude proxy")]
    Bind(#[source] std::io::Error),
    #[error("cannot set up TLS for the proxy's upstream connections\n  fix  check that the system's CA certificates are installed")]
    Tls(#[source] rustls::Error),
    #[error("cannot start the proxy's thread")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Log(#[from] log::LogError),
}

/// A proxy serving in the background until [`RunningProxy::stop`] (or drop).
#[derive(Debug)]
pub struct RunningProxy {
    base_url: String,
    log_path: PathBuf,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningProxy {
    /// `http://127.0.0.1:<port>`, the value for the agent's `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The JSONL file this run writes.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Stops accepting, ends what is still in flight (each gets its log line), joins the thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The upstream connector: HTTPS through rustls (aws-lc-rs, the platform's roots) or plain HTTP,
/// offering by ALPN the HTTP versions `transport` allows.
fn connector(
    tls: &rustls::ClientConfig,
    transport: Transport,
    connect_timeout: Option<Duration>,
) -> hyper_rustls::HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(connect_timeout);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http();
    match transport {
        Transport::Auto => builder.enable_all_versions().wrap_connector(http),
        Transport::Http1 => builder.enable_http1().wrap_connector(http),
        Transport::Http2 => builder.enable_http2().wrap_connector(http),
    }
}

/// Starts the proxy with `config`.
pub fn start(config: ProxyConfig) -> Result<RunningProxy, ProxyError> {
    let started = SystemTime::now();
    let log = log::LogWriter::open(&config.log_dir, started)?;
    let log_path = log.path().to_path_buf();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ProxyError::Tls)?;
    // The system's roots are loaded only for an HTTPS upstream (a plain-HTTP gateway works on a
    // machine without CA certificates).
    let tls = if config.upstream.scheme_str() == Some("https") {
        builder
            .with_platform_verifier()
            .map_err(ProxyError::Tls)?
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()
    };
    let mut client = Client::builder(TokioExecutor::new());
    client.pool_idle_timeout(Duration::from_secs(90));
    if config.transport == Transport::Http2 {
        client.http2_only(true);
    }
    let client = client.build(connector(&tls, config.transport, None));
    let ws_connector = connector(&tls, Transport::Http1, Some(config.ws_connect_timeout));
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(ProxyError::Bind)?;
    listener.set_nonblocking(true).map_err(ProxyError::Bind)?;
    let port = listener.local_addr().map_err(ProxyError::Bind)?.port();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProxyError::Runtime)?;
    let shared = Arc::new(forward::Shared {
        config,
        client,
        ws_connector,
        log,
    });
    let (shutdown, stopped) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("agentpack-proxy".to_string())
        .spawn(move || {
            runtime.block_on(serve(listener, shared, stopped));
            // Dropping the tasks still running writes their log lines (as `client_closed`).
            runtime.shutdown_timeout(Duration::from_millis(500));
        })
        .map_err(ProxyError::Runtime)?;
    Ok(RunningProxy {
        base_url: format!("http://127.0.0.1:{port}"),
        log_path,
        shutdown: Some(shutdown),
        thread: Some(thread),
    })
}

/// Accepts connections from Claude until `stopped` fires.
async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<forward::Shared>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors, say: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        forward::handle(shared.clone(), request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        }
    }
}
