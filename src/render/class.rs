//! GatewayClasses: which are ours, whether their GatewayConfig and Dataplane exist, and their status.

use super::conditions;
use super::error::{Reason, RenderError};
use super::features;
use super::settings::{DataplaneMode, RenderSettings};
use crate::config::go_compat::quote;
use crate::index::{Index, KeyView, class_config, gateway_config};
use crate::resources::{DEFAULT_DATAPLANE, Dataplane, Gateway, GatewayClass, GatewayConfig};
use gateway_api::gatewayclasses::GatewayClassStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A class of ours with everything rendering needs.
#[derive(Debug, Clone)]
pub(crate) struct ReadyClass<'a> {
    pub class: &'a GatewayClass,
    pub config: &'a GatewayConfig,
    pub config_key: KeyView<'a>,
    /// Always set in managed mode; legacy mode does not use Dataplanes.
    pub dataplane: Option<&'a Dataplane>,
}

/// What a GatewayClass name resolves to.
#[derive(Debug, Clone)]
pub(crate) enum ClassState<'a> {
    /// Missing or another controller's: not ours to touch.
    NotOurs,
    /// Ours, but without a usable `parametersRef`, or its GatewayConfig (or Dataplane) is
    /// missing.
    Invalid(&'a GatewayClass, RenderError),
    Ready(ReadyClass<'a>),
}

pub(crate) fn resolve<'a>(index: &'a Index, name: &str, settings: &RenderSettings) -> ClassState<'a> {
    let Some(class) = index.gateway_classes().lookup(KeyView::cluster(name)) else {
        return ClassState::NotOurs;
    };
    if class.spec.controller_name != settings.controller_name {
        return ClassState::NotOurs;
    }
    let Some(config_key) = class_config(class) else {
        return ClassState::Invalid(class, RenderError::new(Reason::InvalidParametersRef));
    };
    with_config(index, class, config_key, settings)
}

/// What a Gateway's class resolves to for that Gateway: a GatewayConfig its
/// `spec.infrastructure.parametersRef` names (in its own namespace) takes the place of the
/// class's, whatever the class's is; a reference to anything else, or to a GatewayConfig
/// that does not exist, invalidates the Gateway (`InvalidParameters`). A class that is not ours
/// stays so, and one whose own parameters are unusable stays invalid. Managed mode only: legacy
/// mode renders one config per class.
pub(crate) fn for_gateway<'a>(index: &'a Index, gw: &'a Gateway, settings: &RenderSettings) -> ClassState<'a> {
    let state = resolve(index, &gw.spec.gateway_class_name, settings);
    let (ClassState::Ready(ReadyClass { class, .. }), Some(named)) = (&state, gateway_config(gw)) else {
        return state;
    };
    match named {
        Ok(key) if index.gateway_configs().lookup(key).is_some() => with_config(index, class, key, settings),
        _ => ClassState::Invalid(class, RenderError::new(Reason::InvalidGatewayParameters)),
    }
}

/// A class of ours rendered with the GatewayConfig of `config_key`.
fn with_config<'a>(
    index: &'a Index,
    class: &'a GatewayClass,
    config_key: KeyView<'a>,
    settings: &RenderSettings,
) -> ClassState<'a> {
    let Some(config) = index.gateway_configs().lookup(config_key) else {
        return ClassState::Invalid(class, RenderError::missing_gateway_config(&config_key));
    };
    let dataplane = match settings.dataplane_mode {
        DataplaneMode::Legacy => None,
        DataplaneMode::Managed => {
            let name = config.spec.dataplane.as_deref().unwrap_or(DEFAULT_DATAPLANE);
            match index.dataplanes().lookup(KeyView::cluster(name)) {
                Some(dp) => Some(dp),
                None => {
                    return ClassState::Invalid(class, RenderError::new(Reason::InvalidDataplane).at("spec.dataplane"));
                }
            }
        }
    };
    if settings.finalizing {
        return ClassState::Invalid(class, RenderError::new(Reason::OperatorShutdown));
    }
    ClassState::Ready(ReadyClass { class, config, config_key, dataplane })
}

/// Whether a class is ours (valid shape and controller), ready or not.
pub(crate) fn is_ours(index: &Index, name: &str, settings: &RenderSettings) -> bool {
    !matches!(resolve(index, name, settings), ClassState::NotOurs)
}

/// The status of a class of ours (`None` for classes that are not ours: they get no status),
/// with the features it supports published in the same write as its `Accepted` condition,
/// valid or not (GEP-2162 wants them there before `Accepted=True`).
pub(crate) fn status(state: &ClassState<'_>, settings: &RenderSettings, now: &Time) -> Option<GatewayClassStatus> {
    let (class, condition) = match state {
        ClassState::NotOurs => return None,
        ClassState::Invalid(class, err) => {
            let message =
                format!("controller {} failed to process GatewayClass: {err}", quote(&settings.controller_name));
            (class, ("False", "InvalidParameters", message))
        }
        ClassState::Ready(r) => {
            let message = format!("GatewayClass is now managed by controller {}", quote(&settings.controller_name));
            (&r.class, ("True", "Accepted", message))
        }
    };
    let mut status = class.status.clone().unwrap_or_default();
    let (s, reason, message) = condition;
    let mut conds = status.conditions.take().unwrap_or_default();
    conditions::set(&mut conds, conditions::build("Accepted", s, reason, message, class.metadata.generation, now));
    status.conditions = Some(conds);
    status.supported_features = Some(features::supported(settings));
    Some(status)
}
