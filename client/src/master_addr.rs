//! `check_master_addr`: a master address as every client takes it, `HOST:PORT` (an IPv6 host
//! in brackets), refused at once otherwise. Without it, `localhost` (no port) or
//! `http://host:7000` (a scheme: TLS follows from `--tls-ca`, not from the address) made a
//! client retry its first call until its deadline, a minute later, saying only that no leader
//! answered.

/// Why `addr` is not a master address, if it is not.
pub fn check_master_addr(addr: &str) -> Result<(), String> {
    if addr.contains("://") {
        return Err("has a scheme: give HOST:PORT (TLS follows from --tls-ca)".to_string());
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err("has no port: give HOST:PORT, e.g. localhost:7000".to_string());
    };
    if host.is_empty() {
        return Err("has no host: give HOST:PORT".to_string());
    }
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.contains(':') && !bracketed {
        return Err("is an IPv6 address without brackets: give [ADDRESS]:PORT".to_string());
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("has port {port:?}: give a port from 1 to 65535")),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_host_and_port_is_a_master_address() {
        for good in ["localhost:7000", "127.0.0.1:1", "[::1]:7000", "m1.example:65535"] {
            assert_eq!(check_master_addr(good), Ok(()), "{good}");
        }
        let bad = [
            ("localhost", "no port"),
            ("http://localhost:7000", "scheme"),
            (":7000", "no host"),
            ("::1", "brackets"),
            ("localhost:0", "port \"0\""),
            ("localhost:70000", "port \"70000\""),
            ("localhost:http", "port \"http\""),
        ];
        for (addr, reason) in bad {
            let refused = check_master_addr(addr).expect_err(addr);
            assert!(refused.contains(reason), "{addr}: {refused}");
        }
    }
}
