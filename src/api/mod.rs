pub mod consts;
pub mod datatype;
pub mod error;
pub mod op;
