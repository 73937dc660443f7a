//! `stunner.l7mp.io/v1alpha1`: older versions of the CRDs, still served (with no conversion
//! webhook) so that old manifests apply. Only their schemas matter: the operator never reads
//! these types.

mod dataplane;
mod gateway_config;
mod static_service;

pub use dataplane::{Dataplane, DataplaneSpec};
pub use gateway_config::{GatewayConfig, GatewayConfigSpec};
pub use static_service::{StaticService, StaticServiceSpec};
