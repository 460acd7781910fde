//! The UDP transport's connection (in progress): a reliable byte stream
//! over datagrams (`reliable.rs`).

pub mod reliable;
