//! Environments on this host: where they live (`location`) and which one a checkout is bound to
//! (`binding`). Shared by the root resolution in `context` and the `agentpack env` command; it
//! calls no command module.

pub mod binding;
pub mod location;
