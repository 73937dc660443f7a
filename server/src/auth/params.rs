//! The query parameters of the credential API, read as upstream's service reads them: decoded
//! by `r.URL.Query()` (the core's [`Query`]: pairs Go cannot decode are dropped, and the error
//! that says so is discarded, so a bad escape is never a 400 by itself), then bound by
//! oapi-codegen's binding, whose refusals are 400s with its own texts. A parameter given twice is refused; one given empty
//! is set, to the empty string.

use stunner_gateway::config::go_compat;
use stunner_gateway::query::Query;

/// Which of the two answers is asked for: they bind different parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /`: the TURN REST API answer; `service` is required.
    Turn,
    /// `GET /ice`: an RTCConfiguration; every parameter is optional.
    Ice,
}

/// What a request asks for. `None`: the parameter is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pub service: Option<String>,
    pub username: Option<String>,
    /// Seconds; any integer Go's `strconv.ParseInt` takes.
    pub ttl: Option<i64>,
    /// `/ice` only, echoed as given.
    pub ice_transport_policy: Option<String>,
    /// An API key: accepted and unused, as upstream.
    pub key: Option<String>,
    pub namespace: Option<String>,
    pub gateway: Option<String>,
    pub listener: Option<String>,
    pub public_addr: Option<String>,
}

/// A query the binding refuses: a 400 with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("Query argument {0} is required, but not found")]
    Required(&'static str),
    #[error("Invalid format for parameter {name}: {reason}")]
    InvalidFormat { name: &'static str, reason: String },
}

/// The parameters of `endpoint` in the query `raw`, bound in the order upstream's generated
/// code binds them (the first refusal is the answer).
pub fn bind(endpoint: Endpoint, raw: &str) -> Result<Params, ParamError> {
    let query = &Query::parse(raw);
    let mut p = Params::default();
    if endpoint == Endpoint::Turn && query.first("service").is_none_or(str::is_empty) {
        return Err(ParamError::Required("service"));
    }
    p.service = single(query, "service")?;
    p.username = single(query, "username")?;
    p.ttl = single(query, "ttl")?.map(|s| parse_int("ttl", &s)).transpose()?;
    if endpoint == Endpoint::Ice {
        p.ice_transport_policy = single(query, "iceTransportPolicy")?;
    }
    p.key = single(query, "key")?;
    p.namespace = single(query, "namespace")?;
    p.gateway = single(query, "gateway")?;
    p.listener = single(query, "listener")?;
    p.public_addr = single(query, "public-addr")?;
    Ok(p)
}

/// The one value of `name`, if given; given more than once, refused.
fn single(query: &Query, name: &'static str) -> Result<Option<String>, ParamError> {
    let mut values = query.values(name);
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => Ok(Some(v.to_owned())),
        (Some(_), Some(_)) => Err(ParamError::InvalidFormat {
            name,
            reason: format!("multiple values for single value parameter '{name}'"),
        }),
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)` with its error texts, as oapi-codegen's binding wraps them.
fn parse_int(name: &'static str, s: &str) -> Result<i64, ParamError> {
    s.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        ParamError::InvalidFormat {
            name,
            reason: format!("error binding string parameter: strconv.ParseInt: parsing {}: {why}", go_compat::quote(s)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(endpoint: Endpoint, query: &str) -> Result<Params, String> {
        bind(endpoint, query).map_err(|e| e.to_string())
    }

    /// A pair Go's `ParseQuery` cannot decode is dropped and its error discarded, as
    /// upstream's `r.URL.Query()` does: the rest of the query is bound as if it were absent.
    #[test]
    fn undecodable_pairs_are_absent() {
        let p = bound(Endpoint::Ice, "username=%zz&service=turn;x&key=%+A&namespace=ns&gateway=g%C3%A9").unwrap();
        assert_eq!(p, Params { namespace: Some("ns".into()), gateway: Some("gé".into()), ..Params::default() });
        // The dropped value does not count as a second one.
        assert_eq!(bound(Endpoint::Turn, "service=turn&service=%2").unwrap().service.as_deref(), Some("turn"));
        assert_eq!(
            bound(Endpoint::Turn, "service=%zz").unwrap_err(),
            "Query argument service is required, but not found"
        );
    }

    #[test]
    fn every_parameter_is_bound() {
        let p = bound(
            Endpoint::Ice,
            "service=turn&username=u1&ttl=3600&iceTransportPolicy=relay&key=k&namespace=ns&gateway=gw&listener=l\
             &public-addr=1.2.3.4",
        )
        .unwrap();
        let want = Params {
            service: Some("turn".into()),
            username: Some("u1".into()),
            ttl: Some(3600),
            ice_transport_policy: Some("relay".into()),
            key: Some("k".into()),
            namespace: Some("ns".into()),
            gateway: Some("gw".into()),
            listener: Some("l".into()),
            public_addr: Some("1.2.3.4".into()),
        };
        assert_eq!(p, want);
        // `/` does not know iceTransportPolicy: not even a second value of it is refused.
        let p = bound(Endpoint::Turn, "service=turn&iceTransportPolicy=a&iceTransportPolicy=b").unwrap();
        assert_eq!(p.ice_transport_policy, None);
        assert_eq!(bound(Endpoint::Ice, "").unwrap(), Params::default());
        assert_eq!(bound(Endpoint::Ice, "username=&ttl=-5").unwrap().username, Some(String::new()));
        assert_eq!(bound(Endpoint::Ice, "ttl=%2B7").unwrap().ttl, Some(7));
    }

    #[test]
    fn refusals_carry_upstreams_texts() {
        for (endpoint, query, want) in [
            (Endpoint::Turn, "", "Query argument service is required, but not found"),
            (Endpoint::Turn, "service=&service=turn", "Query argument service is required, but not found"),
            (
                Endpoint::Turn,
                "service=turn&service=turn",
                "Invalid format for parameter service: multiple values for single value parameter 'service'",
            ),
            (
                Endpoint::Ice,
                "ttl=abc",
                "Invalid format for parameter ttl: error binding string parameter: strconv.ParseInt: parsing \"abc\": invalid syntax",
            ),
            (
                Endpoint::Ice,
                "ttl=",
                "Invalid format for parameter ttl: error binding string parameter: strconv.ParseInt: parsing \"\": invalid syntax",
            ),
            (
                Endpoint::Turn,
                "service=turn&ttl=99999999999999999999",
                "Invalid format for parameter ttl: error binding string parameter: strconv.ParseInt: parsing \"99999999999999999999\": \
                 value out of range",
            ),
            // Bound in upstream's order: username before ttl.
            (
                Endpoint::Ice,
                "ttl=x&username=a&username=b",
                "Invalid format for parameter username: multiple values for single value parameter 'username'",
            ),
            (
                Endpoint::Ice,
                "public-addr=a&public-addr=b",
                "Invalid format for parameter public-addr: multiple values for single value parameter 'public-addr'",
            ),
        ] {
            assert_eq!(bound(endpoint, query).unwrap_err(), want, "{query}");
        }
    }
}
