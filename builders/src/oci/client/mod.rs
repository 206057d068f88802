//! [`OciClient`]: a blocking facade over the `oci-client` crate for the three things agentpack
//! does with a registry: resolve a reference to a manifest digest, pull a tree, push a tree.
//!
//! It owns a current-thread tokio runtime and one `oci-client` client per registry (plain HTTP
//! only where [`OciTransport::is_plain_http`] allows). Bearer tokens are negotiated by the crate
//! from `WWW-Authenticate`; our credentials go only to the registry they are for. Every call is
//! retried with exponential backoff on connect errors, timeouts, 429 and 5xx answers; the blobs of
//! one push (or the existence checks of one push) move concurrently. A push asks first (HEAD) and
//! uploads only the blobs and tags the registry does not already have.
//!
//! A pull verifies every byte against its digest (the crate does, for manifests and blobs), caps
//! the layer at the download limit and the config at [`MAX_CONFIG_BYTES`], and unpacks through the
//! safe extractor into a work directory beside the destination, renamed into place only when
//! everything succeeded: a failed pull leaves nothing at the destination.
//!
//! Layout: `pull` and `push` hold the two transfers, `transfers` the byte counters a caller shows
//! as progress; this module holds the client, its per-registry connections, retries and error
//! mapping, and `resolve`.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Mutex;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;

use super::reference::{OciReference, OciRepository};
use super::{OciError, OciTransport};

mod pull;
mod push;
mod transfers;

pub use pull::PulledTree;
pub use push::{PushJob, PushOutcome};
pub use transfers::{TransferSnapshot, Transfers};

const USER_AGENT: &str = concat!("agentpack/", env!("CARGO_PKG_VERSION"));

/// A blocking OCI registry client; see the module docs.
pub struct OciClient {
    transport: OciTransport,
    runtime: tokio::runtime::Runtime,
    clients: Mutex<BTreeMap<String, oci_client::Client>>,
    transfers: std::sync::Arc<Transfers>,
}

impl std::fmt::Debug for OciClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciClient")
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

/// The HTTP status of a failed call, when the error carries one.
fn http_status(error: &OciDistributionError) -> Option<u16> {
    match error {
        OciDistributionError::ServerError { code, .. } => Some(*code),
        OciDistributionError::RequestError(e) => e.status().map(|s| s.as_u16()),
        _ => None,
    }
}

/// The registry's error codes of a failed call (none when it sent no error envelope).
fn envelope_codes(error: &OciDistributionError) -> impl Iterator<Item = &OciErrorCode> {
    let errors = match error {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.as_slice(),
        _ => &[],
    };
    errors.iter().map(|e| &e.code)
}

fn is_transient(error: &OciDistributionError) -> bool {
    matches!(error, OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout())
        || http_status(error).is_some_and(|code| code >= 500 || code == 429)
}

fn is_not_found(error: &OciDistributionError) -> bool {
    matches!(error, OciDistributionError::ImageManifestNotFoundError(_))
        || http_status(error) == Some(404)
        || envelope_codes(error).any(|code| {
            matches!(
                code,
                OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::BlobUnknown
            )
        })
}

/// Whether `error` is the registry refusing the credentials: `Some(false)` for none or wrong ones
/// (401, `UNAUTHORIZED`), `Some(true)` for ones that do not allow the call (403, `DENIED`).
fn refusal(error: &OciDistributionError) -> Option<bool> {
    if matches!(
        error,
        OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_)
    ) {
        return Some(false);
    }
    match http_status(error) {
        Some(401) => return Some(false),
        Some(403) => return Some(true),
        _ => {}
    }
    // An `UNAUTHORIZED` anywhere in the envelope wins over a `DENIED` (false sorts first).
    envelope_codes(error)
        .filter_map(|code| match code {
            OciErrorCode::Unauthorized => Some(false),
            OciErrorCode::Denied => Some(true),
            _ => None,
        })
        .min()
}

fn io_error(action: &'static str, path: &Path, source: std::io::Error) -> OciError {
    OciError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

impl OciClient {
    /// A client over `transport`.
    pub fn new(transport: OciTransport) -> Result<OciClient, OciError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(OciError::Runtime)?;
        Ok(OciClient {
            transport,
            runtime,
            clients: Mutex::new(BTreeMap::new()),
            transfers: std::sync::Arc::default(),
        })
    }

    /// The bytes and artifacts this client has moved, for a progress display.
    pub fn transfers(&self) -> std::sync::Arc<Transfers> {
        std::sync::Arc::clone(&self.transfers)
    }

    /// The transport this client was made with.
    pub fn transport(&self) -> &OciTransport {
        &self.transport
    }

    fn client_for(&self, registry: &str) -> oci_client::Client {
        let mut clients = match self.clients.lock() {
            Ok(clients) => clients,
            Err(poisoned) => poisoned.into_inner(),
        };
        clients
            .entry(registry.to_owned())
            .or_insert_with(|| {
                let limits = &self.transport.limits;
                oci_client::Client::new(ClientConfig {
                    protocol: if self.transport.is_plain_http(registry) {
                        ClientProtocol::Http
                    } else {
                        ClientProtocol::Https
                    },
                    use_monolithic_push: true,
                    platform_resolver: None,
                    max_concurrent_upload: self.transport.concurrency.max(1),
                    max_concurrent_download: self.transport.concurrency.max(1),
                    connect_timeout: Some(limits.connect_timeout),
                    read_timeout: Some(limits.read_timeout),
                    user_agent: USER_AGENT,
                    ..ClientConfig::default()
                })
            })
            .clone()
    }

    fn auth(&self, registry: &str) -> RegistryAuth {
        self.transport
            .credential_for(registry)
            .map_or(RegistryAuth::Anonymous, |c| c.to_registry_auth())
    }

    async fn retry<T, F, Fut>(&self, op: F) -> Result<T, OciDistributionError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, OciDistributionError>>,
    {
        self.retry_on(op, |error| Some(error)).await
    }

    /// Runs `op` again, after a wait that doubles each time, while it fails with a transient
    /// registry error and retries are left. `registry_error` finds the registry's error in `op`'s
    /// (`None`: a local failure, never retried).
    async fn retry_on<T, E, F, Fut>(
        &self,
        mut op: F,
        registry_error: fn(&E) -> Option<&OciDistributionError>,
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut wait = self.transport.backoff;
        let mut attempt = 0;
        loop {
            let result = op().await;
            let transient = match &result {
                Err(error) if attempt < self.transport.retries => registry_error(error)
                    .filter(|error| is_transient(error))
                    .map(ToString::to_string),
                _ => None,
            };
            let Some(error) = transient else {
                return result;
            };
            tracing::debug!(%error, attempt, "retrying an OCI registry call");
            tokio::time::sleep(wait).await;
            wait = wait.saturating_mul(2);
            attempt += 1;
        }
    }

    /// Our error for a crate error while doing `what` on `repo`. Never includes a credential.
    fn map_error(&self, repo: &OciRepository, what: &str, error: OciDistributionError) -> OciError {
        let registry = repo.registry.clone();
        let unauthorized = |denied: bool| {
            let source = self.transport.credential_source(&repo.registry);
            let helper = self.transport.credential_helper_for(&repo.registry);
            let (reason, fix) = match (source, denied) {
                (None, _) => match (helper, self.transport.docker_config_path()) {
                    (Some(helper), Some(config)) => (
                        format!("it requires credentials and none are set: {} leaves them to the credential helper {helper}, which agentpack does not run", config.display()),
                        format!("export AGENTPACK_OCI_TOKEN=user:password (or a bearer token; it is sent to every registry agentpack reaches), e.g. the Username and Secret that `echo {} | {helper} get` prints", repo.registry),
                    ),
                    _ => (
                        "it requires credentials and none are set".to_owned(),
                        format!("set AGENTPACK_OCI_TOKEN=user:password (or a bearer token), or add an `auths` entry for {} to ~/.docker/config.json (`docker login {}`; a credential helper is not run)", repo.registry, repo.registry),
                    ),
                },
                (Some(source), false) => (
                    format!("the credentials from {source} were not accepted"),
                    format!("check the credentials for {} in {source}", repo.registry),
                ),
                (Some(source), true) => (
                    format!("the credentials from {source} do not allow this"),
                    format!("ask for access to {}, or use credentials that have it", repo.repository),
                ),
            };
            OciError::Unauthorized {
                registry: registry.clone(),
                repository: repo.repository.clone(),
                what: what.to_owned(),
                reason,
                fix,
            }
        };
        if let Some(denied) = refusal(&error) {
            return unauthorized(denied);
        }
        match error {
            OciDistributionError::RegistryError { envelope, .. } => OciError::Registry {
                registry,
                what: what.to_owned(),
                message: envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}: {}", e.code, e.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            },
            OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
                OciError::Unreachable {
                    registry,
                    what: what.to_owned(),
                    cause: e.to_string(),
                }
            }
            OciDistributionError::DigestError(e) => OciError::Corrupt {
                reference: what.to_owned(),
                reason: format!("the registry served bytes that do not match their digest ({e})"),
            },
            other => OciError::Registry {
                registry,
                what: what.to_owned(),
                message: other.to_string(),
            },
        }
    }

    /// The digest of the manifest `reference` names; `None` when the repository or the reference
    /// does not exist.
    pub fn resolve(
        &self,
        repo: &OciRepository,
        reference: &OciReference,
    ) -> Result<Option<String>, OciError> {
        let shown = repo.display_with(reference);
        let client = self.client_for(&repo.registry);
        let auth = self.auth(&repo.registry);
        let target = repo.client_reference(reference);
        self.runtime.block_on(async {
            match self
                .retry(|| client.fetch_manifest_digest(&target, &auth))
                .await
            {
                Ok(digest) => Ok(Some(digest)),
                Err(error) if is_not_found(&error) => Ok(None),
                Err(error) => Err(self.map_error(repo, &format!("resolving {shown}"), error)),
            }
        })
    }
}
