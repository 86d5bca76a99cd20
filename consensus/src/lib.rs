//! A durable, generic replicated log: openraft over sled, a tonic network, static bootstrap.
