//! The configuration of one consensus node: identity, peers, storage and timing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use platform::security::Security;

/// Leaders send a heartbeat (an empty AppendEntries) this often. Each AppendEntries RPC also
/// times out after this long in openraft 0.9, so it must exceed a disk flush plus a round trip.
pub const HEARTBEAT_MS_DEFAULT: u64 = 150;
/// A follower that hears no leader for a random time in `[min, max)` starts an election;
/// well under etcd's 1 s so a dead master is replaced quickly.
pub const ELECTION_TIMEOUT_MIN_MS_DEFAULT: u64 = 500;
/// See [`ELECTION_TIMEOUT_MIN_MS_DEFAULT`].
pub const ELECTION_TIMEOUT_MAX_MS_DEFAULT: u64 = 1000;
/// A snapshot is built after this many entries were applied since the last one. An entry holds
/// a batch of up to 64 KiB of commands, so this bounds the log between purges to about
/// (1,000 + 500) x 64 KiB = 96 MiB even at full batches.
pub const SNAPSHOT_LOGS_SINCE_LAST_DEFAULT: u64 = 1_000;
/// Entries already in a snapshot that are kept in the log, so a follower slightly behind
/// catches up from the log instead of a whole snapshot.
pub const MAX_IN_SNAPSHOT_LOG_TO_KEEP_DEFAULT: u64 = 500;
/// A write or linearizable read that has not finished after this long fails with a timeout.
pub const WRITE_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// No timing flag may exceed this: a bigger value is a typo, not a configuration.
pub const TIMING_MS_MAX: u64 = 600_000;

/// Everything a consensus node needs to start.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id; must be a key of `peers`.
    pub id: u64,
    /// Where this node's Raft service listens (the binary binds it; the node does not).
    pub listen: SocketAddr,
    /// Every member of the static group, by id, as `host:port` other members can dial.
    pub peers: BTreeMap<u64, String>,
    /// Holds the sled log (`sled/`) and snapshot files (`snapshots/`).
    pub data_dir: PathBuf,
    /// See [`HEARTBEAT_MS_DEFAULT`].
    pub heartbeat_ms: u64,
    /// See [`ELECTION_TIMEOUT_MIN_MS_DEFAULT`].
    pub election_timeout_min_ms: u64,
    /// See [`ELECTION_TIMEOUT_MAX_MS_DEFAULT`].
    pub election_timeout_max_ms: u64,
    /// See [`SNAPSHOT_LOGS_SINCE_LAST_DEFAULT`].
    pub snapshot_logs_since_last: u64,
    /// See [`MAX_IN_SNAPSHOT_LOG_TO_KEEP_DEFAULT`].
    pub max_in_snapshot_log_to_keep: u64,
    /// See [`WRITE_TIMEOUT_MS_DEFAULT`].
    pub write_timeout_ms: u64,
    /// TLS and token for Raft traffic, both ways; the default is neither.
    pub security: Security,
    /// Where each member's Raft service is dialled, when it has a port of its own; empty
    /// means at its `peers` address (one port for everything). It lists at least every peer;
    /// it may list more (members that join later, with these ids).
    pub raft_addrs: BTreeMap<u64, String>,
    /// The newest feature level (command set) the application on this node decodes and
    /// admits, answered in `ClusterInfo` so a leader can tell what every member decodes
    /// (`member_levels.rs`); 0, the default, says none (as builds before levels answer).
    pub feature_level: u32,
    /// This node joins a running group (it asks to be added) instead of seeding a new one:
    /// [`crate::ConsensusNode::bootstrap`] initializes nothing.
    pub joins: bool,
}

/// A configuration that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("peer list is empty: expected `1=host:port,2=host:port,...`")]
    NoPeers,
    #[error("peer `{item}` is malformed: {reason}")]
    BadPeer { item: String, reason: String },
    #[error("node id {id} is not in the peer list {peers:?}")]
    IdNotInPeers { id: u64, peers: BTreeMap<u64, String> },
    #[error("{name} is {value_ms} ms: {rule}")]
    Timing { name: &'static str, value_ms: u64, rule: String },
    #[error("the Raft addresses name ids {raft:?} but the peers are {peers:?}: list every peer")]
    RaftAddrsMismatch { peers: Vec<u64>, raft: Vec<u64> },
    #[error("{name} must be at least 1")]
    Zero { name: &'static str },
    #[error(
        "node {id} listens on {listen} but the peers give {addr} as member {id}'s address: \
         is --id the one of this host?"
    )]
    NotOwnAddr { id: u64, listen: SocketAddr, addr: SocketAddr },
}

impl NodeConfig {
    /// A configuration with every tunable at its default.
    pub fn new(
        id: u64,
        listen: SocketAddr,
        peers: BTreeMap<u64, String>,
        data_dir: PathBuf,
    ) -> Self {
        Self {
            id,
            listen,
            peers,
            data_dir,
            heartbeat_ms: HEARTBEAT_MS_DEFAULT,
            election_timeout_min_ms: ELECTION_TIMEOUT_MIN_MS_DEFAULT,
            election_timeout_max_ms: ELECTION_TIMEOUT_MAX_MS_DEFAULT,
            snapshot_logs_since_last: SNAPSHOT_LOGS_SINCE_LAST_DEFAULT,
            max_in_snapshot_log_to_keep: MAX_IN_SNAPSHOT_LOG_TO_KEEP_DEFAULT,
            write_timeout_ms: WRITE_TIMEOUT_MS_DEFAULT,
            security: Security::default(),
            raft_addrs: BTreeMap::new(),
            feature_level: 0,
            joins: false,
        }
    }

    /// Checks the rules that involve more than one field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // A membership change refuses member id 0: no founding member may have it either.
        if self.id == 0 {
            return Err(ConfigError::Zero { name: "the node id (--id)" });
        }
        if self.peers.is_empty() {
            return Err(ConfigError::NoPeers);
        }
        if !self.peers.contains_key(&self.id) {
            return Err(ConfigError::IdNotInPeers { id: self.id, peers: self.peers.clone() });
        }
        self.check_own_addr()?;
        let unlisted = self.peers.keys().any(|id| !self.raft_addrs.contains_key(id));
        if !self.raft_addrs.is_empty() && unlisted {
            return Err(ConfigError::RaftAddrsMismatch {
                peers: self.peers.keys().copied().collect(),
                raft: self.raft_addrs.keys().copied().collect(),
            });
        }
        let timings = [
            ("heartbeat_ms", self.heartbeat_ms),
            ("election_timeout_min_ms", self.election_timeout_min_ms),
            ("election_timeout_max_ms", self.election_timeout_max_ms),
            ("write_timeout_ms", self.write_timeout_ms),
        ];
        for (name, value_ms) in timings {
            if value_ms == 0 || value_ms > TIMING_MS_MAX {
                let rule = format!("must be in 1..={TIMING_MS_MAX}");
                return Err(ConfigError::Timing { name, value_ms, rule });
            }
        }
        if self.election_timeout_min_ms <= 2 * self.heartbeat_ms {
            let rule = format!("must exceed twice heartbeat_ms ({} ms)", self.heartbeat_ms);
            let value_ms = self.election_timeout_min_ms;
            return Err(ConfigError::Timing { name: "election_timeout_min_ms", value_ms, rule });
        }
        if self.election_timeout_max_ms <= self.election_timeout_min_ms {
            let rule = format!(
                "must exceed election_timeout_min_ms ({} ms)",
                self.election_timeout_min_ms
            );
            let value_ms = self.election_timeout_max_ms;
            return Err(ConfigError::Timing { name: "election_timeout_max_ms", value_ms, rule });
        }
        if self.snapshot_logs_since_last == 0 {
            return Err(ConfigError::Zero { name: "snapshot_logs_since_last" });
        }
        Ok(())
    }

    /// A node that listens on a host's own address is the peer of that address: started with
    /// the wrong `--id`, it would answer for another member (and vote as it). Refused where
    /// `listen` is another member's address, or on the IP of this node's own address at
    /// another port; checked only where the peers are dialled at `listen` (no separate Raft
    /// addresses) and both are IP addresses. A wildcard `listen`, port 0, a host name or
    /// another IP (a translated address) cannot be compared.
    fn check_own_addr(&self) -> Result<(), ConfigError> {
        let listen = self.listen;
        if !self.raft_addrs.is_empty() || listen.ip().is_unspecified() || listen.port() == 0 {
            return Ok(());
        }
        let parsed = |addr: &String| addr.parse::<SocketAddr>().ok();
        let Some(own) = self.peers.get(&self.id).and_then(parsed) else { return Ok(()) };
        let others = self.peers.iter().filter(|(id, _)| **id != self.id);
        let anothers = others.filter_map(|(_, addr)| parsed(addr)).any(|addr| addr == listen);
        if anothers || (own.ip() == listen.ip() && own.port() != listen.port()) {
            return Err(ConfigError::NotOwnAddr { id: self.id, listen, addr: own });
        }
        Ok(())
    }

    /// The openraft configuration these settings stand for.
    pub(crate) fn raft_config(&self) -> openraft::Config {
        openraft::Config {
            cluster_name: "raftrain".to_string(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            // Each snapshot chunk may take a disk write on the receiver.
            install_snapshot_timeout: self.write_timeout_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_logs_since_last),
            max_in_snapshot_log_to_keep: self.max_in_snapshot_log_to_keep,
            // A lagging follower within one snapshot interval is fed from the log.
            replication_lag_threshold: self.snapshot_logs_since_last
                + self.max_in_snapshot_log_to_keep,
            // An AppendEntries RPC times out after one heartbeat interval, so it must carry
            // at most what a follower decodes, writes and syncs well within it (16 x 64 KiB =
            // 1 MiB). At 64 (4 MiB) a follower catching up on a million-chunk report in a
            // debug build never answered within 100 ms: every attempt timed out, the same
            // batch was sent again for ever, and the group could not elect a leader that
            // could commit (`master_large_job`).
            max_payload_entries: PAYLOAD_ENTRIES_MAX,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES_MAX,
            ..Default::default()
        }
    }
}

/// Entries per AppendEntries RPC at most (openraft's default is 300).
const PAYLOAD_ENTRIES_MAX: u64 = 16;

/// One InstallSnapshot chunk carries at most this many snapshot bytes (openraft's default, made
/// explicit): a 256 MiB snapshot is 86 chunks, each one write on the receiver.
const SNAPSHOT_CHUNK_BYTES_MAX: u64 = 3 * 1024 * 1024;

// A chunk plus its request (vote, meta with the membership) fits one gRPC message, and a whole
// snapshot is at most what a receiver accepts (`rpc_bounds`) and decodes (`snapshot_file`).
const _: () = assert!(SNAPSHOT_CHUNK_BYTES_MAX + 1024 * 1024 <= platform::MESSAGE_BYTES_MAX as u64);
const _: () = assert!(
    crate::snapshot_file::STATE_SNAPSHOT_BYTES_MAX as u64
        <= crate::snapshot_file::SNAPSHOT_BYTES_MAX
);

/// Parses `1=127.0.0.1:7001,2=127.0.0.1:7002`; an error names the offending item.
pub fn parse_peers(text: &str) -> Result<BTreeMap<u64, String>, ConfigError> {
    let mut peers = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let bad = |reason: &str| ConfigError::BadPeer {
            item: item.to_string(),
            reason: reason.to_string(),
        };
        let Some((id, addr)) = item.split_once('=') else {
            return Err(bad("expected `id=host:port`"));
        };
        let id: u64 = id.trim().parse().map_err(|_| bad("the id is not an unsigned integer"))?;
        if id == 0 {
            return Err(bad("member id 0 is not allowed: give an id of 1 or more"));
        }
        let addr = addr.trim();
        let port = addr.rsplit_once(':').map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
            return Err(bad("the address is not `host:port`"));
        }
        let same_addr = |known: &String| known.eq_ignore_ascii_case(addr);
        if let Some((other, _)) = peers.iter().find(|(_, known)| same_addr(known)) {
            // Two ids at one address would be one process counted as two voters.
            return Err(bad(&format!("the address is member {other}'s too")));
        }
        if peers.insert(id, addr.to_string()).is_some() {
            return Err(bad("the id appears twice"));
        }
    }
    if peers.is_empty() {
        return Err(ConfigError::NoPeers);
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<&[(u64, &str)], &str>) {
        let actual = parse_peers(text);
        match (actual, expected) {
            (Ok(peers), Ok(want)) => {
                let want: BTreeMap<u64, String> =
                    want.iter().map(|(id, addr)| (*id, addr.to_string())).collect();
                assert_eq!(peers, want, "{text}");
            }
            (Err(error), Err(want)) => assert!(error.to_string().contains(want), "{text}: {error}"),
            (actual, expected) => panic!("{text}: got {actual:?}, expected {expected:?}"),
        }
    }

    /// Peer lists parse into ordered maps; every malformed item is named in the error.
    #[test]
    fn parses_peer_lists() {
        check(
            "1=127.0.0.1:7001,2=127.0.0.1:7002",
            Ok(&[(1, "127.0.0.1:7001"), (2, "127.0.0.1:7002")]),
        );
        check(" 3=h:1 , 1=g:2 ,", Ok(&[(1, "g:2"), (3, "h:1")]));
        check("", Err("empty"));
        check("1=a:1,x=b:2", Err("`x=b:2`"));
        check("1=a:1,2=b", Err("`2=b`"));
        check("1=a:1,1=b:2", Err("twice"));
        check("1=a:1,2=A:1", Err("`2=A:1` is malformed: the address is member 1's too"));
        check("1", Err("`1`"));
        check("0=a:1,1=b:2", Err("member id 0 is not allowed"));
    }

    /// The defaults are valid and the cross-field timing rules are enforced.
    #[test]
    fn validates_timing() {
        let peers = parse_peers("1=127.0.0.1:1").expect("literal peers parse");
        let listen = "127.0.0.1:1".parse().expect("literal address parses");
        let config = NodeConfig::new(1, listen, peers, PathBuf::from("d"));
        assert_eq!(config.validate(), Ok(()));
        let short_election = NodeConfig { election_timeout_min_ms: 300, ..config.clone() };
        assert!(short_election.validate().is_err());
        let inverted = NodeConfig { election_timeout_max_ms: 500, ..config.clone() };
        assert!(inverted.validate().is_err());
        let zero = NodeConfig { id: 0, ..config.clone() };
        assert!(matches!(zero.validate(), Err(ConfigError::Zero { .. })), "as a member change");
        let stranger = NodeConfig { id: 2, ..config.clone() };
        assert!(matches!(stranger.validate(), Err(ConfigError::IdNotInPeers { .. })));
        let raft_addrs = parse_peers("1=127.0.0.1:2").expect("literal peers parse");
        let own_port = NodeConfig { raft_addrs, ..config.clone() };
        assert_eq!(own_port.validate(), Ok(()));
        let raft_addrs = parse_peers("1=127.0.0.1:2,2=127.0.0.1:3").expect("literal peers parse");
        let more = NodeConfig { raft_addrs, ..config.clone() };
        assert_eq!(more.validate(), Ok(()), "members that join later may be listed");
        let raft_addrs = parse_peers("2=127.0.0.1:3").expect("literal peers parse");
        let mismatched = NodeConfig { raft_addrs, ..config };
        assert!(matches!(mismatched.validate(), Err(ConfigError::RaftAddrsMismatch { .. })));
    }

    /// A node listening on an address the peers give another member refuses to start (a host
    /// started with the wrong `--id`); a wildcard or a host name is not compared.
    #[test]
    fn refuses_to_listen_at_another_members_address() {
        let peers = parse_peers("1=127.0.0.1:1,2=127.0.0.1:2,3=node-3:3").expect("peers parse");
        let at = |id: u64, listen: &str| {
            let listen = listen.parse().expect("literal address parses");
            NodeConfig::new(id, listen, peers.clone(), PathBuf::from("d")).validate()
        };
        assert_eq!(at(2, "127.0.0.1:2"), Ok(()));
        let error = at(2, "127.0.0.1:1").expect_err("member 1's address");
        assert!(error
            .to_string()
            .contains("node 2 listens on 127.0.0.1:1 but the peers give 127.0.0.1:2"));
        assert_eq!(at(2, "0.0.0.0:2"), Ok(()), "a wildcard");
        assert_eq!(at(3, "127.0.0.1:3"), Ok(()), "a host name");
        assert!(at(2, "127.0.0.1:9").is_err(), "its own IP at another port");
        assert_eq!(at(2, "10.0.0.2:2"), Ok(()), "another IP: a translated address");
    }
}
