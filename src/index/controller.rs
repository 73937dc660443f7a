//! The controllers of the Go operator (`controller.New(name, ...)` in its
//! internal/controllers), each the watcher of some kinds: what the `controller` label of the
//! `controller_runtime_*` metrics names. Which kind belongs to which is a column of the kind
//! table ([`Controller::of`]).

macro_rules! controllers {
    ($($name:ident),* $(,)?) => {
        /// One upstream controller, named as upstream names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[allow(non_camel_case_types)] // upstream's controller names, as the metrics show them
        pub enum Controller {
            $($name,)*
        }

        impl Controller {
            /// Every controller, in declaration order.
            pub const ALL: &'static [Controller] = &[$(Controller::$name,)*];

            /// The controller's name: the value of the metrics' `controller` label.
            pub fn name(self) -> &'static str {
                match self {
                    $(Controller::$name => stringify!($name),)*
                }
            }
        }
    };
}

controllers!(gateway, gatewayconfig, udproute, dataplane, node);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_upstreams() {
        let names: Vec<_> = Controller::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["gateway", "gatewayconfig", "udproute", "dataplane", "node"]);
    }
}
