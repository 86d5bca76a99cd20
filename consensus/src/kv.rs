//! A trivial key-value [`StateMachine`] for tests and the benchmark: `Put` returns the
//! previous value, `Get` the current one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{codec, ApplyError, RestoreError, StateMachine};

/// A command of the key-value machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvCommand {
    Put { key: String, value: String },
    Get { key: String },
}

/// What the key-value machine answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvResponse {
    /// The previous value for `Put`, the current one for `Get`.
    Value(Option<String>),
    /// The command bytes did not decode; the state is unchanged.
    Invalid(String),
}

impl KvCommand {
    /// The bytes to hand to `ConsensusNode::write`.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self).expect("a key-value command always encodes")
    }
}

impl KvResponse {
    /// Decodes the bytes `ConsensusNode::write` returned.
    pub fn decode(bytes: &[u8]) -> Result<Self, bincode::Error> {
        codec::decode(bytes)
    }
}

/// The key-value state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvStore {
    map: BTreeMap<String, String>,
}

impl KvStore {
    /// The current value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    /// Every key and value, in key order.
    pub fn entries(&self) -> &BTreeMap<String, String> {
        &self.map
    }
}

impl StateMachine for KvStore {
    fn apply(&mut self, command: &[u8], _entry_term: u64) -> Result<Vec<u8>, ApplyError> {
        // Every build decodes the same two commands: a malformed one is answered, not fatal.
        let response = match codec::decode::<KvCommand>(command) {
            Ok(KvCommand::Put { key, value }) => KvResponse::Value(self.map.insert(key, value)),
            Ok(KvCommand::Get { key }) => KvResponse::Value(self.map.get(&key).cloned()),
            Err(error) => KvResponse::Invalid(error.to_string()),
        };
        Ok(codec::encode(&response).expect("a key-value response always encodes"))
    }

    fn snapshot(&self) -> Vec<u8> {
        codec::encode(&self.map).expect("a map of strings always encodes")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        self.map = codec::decode(snapshot).map_err(|error| RestoreError::new(error.to_string()))?;
        Ok(())
    }
}
