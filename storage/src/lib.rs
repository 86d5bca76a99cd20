//! RecordIO datasets (byte-compatible with PaddlePaddle/recordio) and checkpoint file formats.

pub mod backup_file;
pub mod checkpoint;
pub mod durable_file;
pub mod recordio;
