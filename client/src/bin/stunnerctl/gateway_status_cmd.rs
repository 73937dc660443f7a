//! `stunnerctl gateway-status`: the operator's statuses, narrowed down like `config` narrows
//! configs.

use super::output::Printer;
use super::summary;
use std::error::Error;
use stunner_gateway_client::cds::{CdsClient, ObjectStatus, StatusList};

/// Which objects to show: `-a` or one namespace; with a Gateway name, only that Gateway among
/// the Gateways (its routes and the classes stay, filtered by namespace as usual).
pub struct Filter<'a> {
    pub all_namespaces: bool,
    pub namespace: &'a str,
    pub gateway: Option<&'a str>,
}

impl Filter<'_> {
    fn keeps(&self, o: &ObjectStatus) -> bool {
        (self.all_namespaces || o.namespace == self.namespace)
            && (o.kind != "Gateway" || self.gateway.is_none_or(|g| o.name == g))
    }
}

pub async fn run(client: &CdsClient, filter: &Filter<'_>, printer: &mut Printer) -> Result<(), Box<dyn Error>> {
    let list = client.statuses().await?;
    let items: Vec<ObjectStatus> = list.items.into_iter().filter(|o| filter.keeps(o)).collect();
    if let Some(gateway) = filter.gateway
        && !items.iter().any(|o| o.kind == "Gateway")
    {
        let which = if filter.all_namespaces {
            format!("{gateway} (in any namespace)")
        } else {
            format!("{}/{gateway}", filter.namespace)
        };
        return Err(
            format!("gateway {which} has no status on the config discovery server at {}", client.server()).into()
        );
    }
    if items.is_empty() {
        super::output::nothing_found("statuses", filter.all_namespaces, filter.namespace);
        return Ok(());
    }
    printer.document(&StatusList { items }, summary::statuses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(kind: &str, namespace: &str, name: &str) -> ObjectStatus {
        ObjectStatus { kind: kind.into(), namespace: namespace.into(), name: name.into(), ..Default::default() }
    }

    #[test]
    fn filters_by_namespace_and_gateway_name() {
        let items = [
            obj("GatewayClass", "", "gc"),
            obj("Gateway", "a", "g1"),
            obj("Gateway", "a", "g2"),
            obj("UDPRoute", "a", "r"),
        ];
        let kept = |f: Filter<'_>| items.iter().filter(|o| f.keeps(o)).map(ObjectStatus::key).collect::<Vec<_>>();
        assert_eq!(kept(Filter { all_namespaces: false, namespace: "a", gateway: None }), ["a/g1", "a/g2", "a/r"]);
        assert_eq!(kept(Filter { all_namespaces: false, namespace: "a", gateway: Some("g2") }), ["a/g2", "a/r"]);
        assert_eq!(kept(Filter { all_namespaces: true, namespace: "b", gateway: None }), ["gc", "a/g1", "a/g2", "a/r"]);
        assert!(kept(Filter { all_namespaces: false, namespace: "b", gateway: None }).is_empty());
    }
}
