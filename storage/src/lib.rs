//! RecordIO datasets (byte-compatible with PaddlePaddle/recordio) and checkpoint file formats.

pub mod recordio;
