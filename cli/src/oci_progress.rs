//! What the spinner of an upload to an OCI registry (`store push`, `publish`) says: read from the
//! client's transfer counters at each redraw. Formats only; never talks to the registry.

use agentpack_builders::oci::OciClient;

use crate::output::human_bytes;

/// The spinner's status after its label: artifacts done (of `artifacts`) and bytes sent of
/// those the registry lacked.
pub fn transfer_status(
    client: &OciClient,
    artifacts: Option<usize>,
) -> Box<dyn Fn() -> String + Send> {
    let transfers = client.transfers();
    Box::new(move || {
        let now = transfers.snapshot();
        let bytes = format!(
            "{} of {} uploaded",
            human_bytes(now.uploaded_bytes),
            human_bytes(now.upload_total_bytes)
        );
        match artifacts {
            Some(total) => format!("{}/{total} done, {bytes}", now.artifacts_done),
            None => bytes,
        }
    })
}
