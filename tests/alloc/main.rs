//! The tests that count heap bytes (`counting`'s global allocator counts every allocation of the
//! binary, so they have a binary of their own and take turns inside it).

#[path = "../common/mod.rs"]
mod common;
#[path = "../counting/mod.rs"]
mod counting;

mod index_garbage;
mod version_alloc;
