//! `check_master_addr`: a master address as every client takes it, `HOST:PORT` (an IPv6 host
//! in brackets), refused at once otherwise. Without it, `localhost` (no port) or
//! `http://host:7000` (a scheme: TLS follows from `--tls-ca`, not from the address) made a
//! client retry its first call until its deadline, a minute later, saying only that no leader
//! answered.

/// What is wrong with a master address; `Display` also says what to give instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MasterAddrError {
    #[error("has a scheme: give HOST:PORT (TLS follows from --tls-ca)")]
    Scheme,
    #[error("has no port: give HOST:PORT, e.g. localhost:7000")]
    NoPort,
    #[error("has no host: give HOST:PORT")]
    NoHost,
    #[error("is an IPv6 address without brackets: give [ADDRESS]:PORT")]
    UnbracketedIpv6,
    /// The text after the last colon is not a port from 1 to 65535.
    #[error("has port {port:?}: give a port from 1 to 65535")]
    BadPort { port: String },
}

/// Why `addr` is not a master address, if it is not.
pub fn check_master_addr(addr: &str) -> Result<(), MasterAddrError> {
    if addr.contains("://") {
        return Err(MasterAddrError::Scheme);
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(MasterAddrError::NoPort);
    };
    if host.is_empty() {
        return Err(MasterAddrError::NoHost);
    }
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.contains(':') && !bracketed {
        return Err(MasterAddrError::UnbracketedIpv6);
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(MasterAddrError::BadPort { port: port.to_string() }),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only `HOST:PORT` passes; every other shape is refused for its own reason, and the
    /// message names the port that is wrong.
    #[test]
    fn only_host_and_port_is_a_master_address() {
        for good in ["localhost:7000", "127.0.0.1:1", "[::1]:7000", "m1.example:65535"] {
            assert_eq!(check_master_addr(good), Ok(()), "{good}");
        }
        let bad_port = |port: &str| MasterAddrError::BadPort { port: port.to_string() };
        let bad = [
            ("localhost", MasterAddrError::NoPort),
            ("http://localhost:7000", MasterAddrError::Scheme),
            (":7000", MasterAddrError::NoHost),
            ("::1", MasterAddrError::UnbracketedIpv6),
            ("localhost:0", bad_port("0")),
            ("localhost:70000", bad_port("70000")),
            ("localhost:http", bad_port("http")),
        ];
        for (addr, reason) in bad {
            assert_eq!(check_master_addr(addr), Err(reason), "{addr}");
        }
        let refused = check_master_addr("localhost:http").expect_err("not a port");
        assert_eq!(refused.to_string(), "has port \"http\": give a port from 1 to 65535");
    }
}
