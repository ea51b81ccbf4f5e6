pub mod questions;
