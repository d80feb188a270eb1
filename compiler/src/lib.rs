//! kai-policy's compiler: KDL policy files → a checked [`model::Policy`] with every diagnostic →
//! KAI `Queue` objects, `PriorityClass` objects and the compiled scheduler config.
//!
//! Architecture invariant: the checker and the model do no I/O; reading files ([`source`]) and
//! Git ([`git`]) live at the edge, and the binary (`main.rs`) only wires them together.
#![forbid(unsafe_code)]

pub mod check;
pub mod diagnostics;
pub mod model;
pub mod quantity;
pub mod source;
