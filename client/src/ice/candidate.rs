//! Candidates as upstream's icetest lists them (`udp4 relay 10.0.0.1:3478 related
//! 0.0.0.0:40000`): ours from the peer, the remote ones read from the answer's
//! `a=candidate` lines.

use std::net::SocketAddr;

/// One candidate line of the report; `selected` marks the pair in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateDesc {
    pub text: String,
    pub address: Option<SocketAddr>,
    pub selected: bool,
}

/// `udp4 TYPE ADDR[ related RADDR]`, pion's short form.
pub fn describe(kind: &str, addr: SocketAddr, related: Option<SocketAddr>) -> String {
    let family = if addr.is_ipv4() { "udp4" } else { "udp6" };
    match related {
        Some(r) => format!("{family} {kind} {addr} related {r}"),
        None => format!("{family} {kind} {addr}"),
    }
}

/// The candidates of an SDP (`a=candidate:F C udp P IP PORT typ TYPE [raddr IP rport PORT]`);
/// lines of another shape are skipped.
pub fn from_sdp(sdp: &str) -> Vec<CandidateDesc> {
    sdp.lines()
        .filter_map(|line| line.trim().strip_prefix("a=candidate:"))
        .filter_map(|c| {
            let f: Vec<&str> = c.split_whitespace().collect();
            if f.len() < 8 || !f[2].eq_ignore_ascii_case("udp") || f[6] != "typ" {
                return None;
            }
            let addr: SocketAddr = format!("{}:{}", f[4], f[5]).parse().ok()?;
            let related = match (f.get(8), f.get(9), f.get(10), f.get(11)) {
                (Some(&"raddr"), Some(ip), Some(&"rport"), Some(port)) => format!("{ip}:{port}").parse().ok(),
                _ => None,
            };
            Some(CandidateDesc { text: describe(f[7], addr, related), address: Some(addr), selected: false })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdp_candidates_read_as_pion_prints_them() {
        let sdp = "v=0\r\na=candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host\r\n\
                   a=candidate:2 1 udp 16777215 10.0.0.1 50000 typ relay raddr 0.0.0.0 rport 4000\r\n\
                   a=candidate:3 1 tcp 1 10.0.0.1 9 typ host tcptype active\r\n";
        let got: Vec<String> = from_sdp(sdp).into_iter().map(|c| c.text).collect();
        assert_eq!(got, ["udp4 host 127.0.0.1:40000", "udp4 relay 10.0.0.1:50000 related 0.0.0.0:4000"]);
    }
}
