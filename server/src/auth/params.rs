//! The query parameters of the credential API, read as upstream's service reads them: Go's
//! `url.ParseQuery` (pairs it cannot decode are dropped), then oapi-codegen's binding, whose
//! refusals are 400s with its own texts. A parameter given twice is refused; one given empty
//! is set, to the empty string.

use stunner_gateway::config::go_compat;

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

/// The query's pairs, decoded as Go's `url.ParseQuery` does: `&`-separated, `+` for a space,
/// percent escapes; a pair with a `;` or a bad escape is dropped, an empty one skipped.
pub fn parse_query(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty() && !pair.contains(';'))
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((unescape(key)?, unescape(value)?))
        })
        .collect()
}

/// Go's `url.QueryUnescape`; `None` for a malformed escape. Bytes that are not UTF-8 become
/// U+FFFD, as Go's JSON encoder writes them.
fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The parameters of `endpoint`, bound in the order upstream's generated code binds them
/// (the first refusal is the answer).
pub fn bind(endpoint: Endpoint, pairs: &[(String, String)]) -> Result<Params, ParamError> {
    let mut p = Params::default();
    if endpoint == Endpoint::Turn && first(pairs, "service").is_none_or(str::is_empty) {
        return Err(ParamError::Required("service"));
    }
    p.service = single(pairs, "service")?;
    p.username = single(pairs, "username")?;
    p.ttl = single(pairs, "ttl")?.map(|s| parse_int("ttl", &s)).transpose()?;
    if endpoint == Endpoint::Ice {
        p.ice_transport_policy = single(pairs, "iceTransportPolicy")?;
    }
    p.key = single(pairs, "key")?;
    p.namespace = single(pairs, "namespace")?;
    p.gateway = single(pairs, "gateway")?;
    p.listener = single(pairs, "listener")?;
    p.public_addr = single(pairs, "public-addr")?;
    Ok(p)
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The one value of `name`, if given; given more than once, refused.
fn single(pairs: &[(String, String)], name: &'static str) -> Result<Option<String>, ParamError> {
    let mut values = pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => Ok(Some(v.clone())),
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
        bind(endpoint, &parse_query(query)).map_err(|e| e.to_string())
    }

    #[test]
    fn queries_decode_as_gos_parse_query() {
        let pairs = parse_query("a=1&&b=x+y%21&c&bad=%zz&semi=1;2&=empty-key&d=%C3%A9");
        let want = [("a", "1"), ("b", "x y!"), ("c", ""), ("", "empty-key"), ("d", "é")];
        assert_eq!(pairs, want.map(|(k, v)| (k.to_string(), v.to_string())));
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
