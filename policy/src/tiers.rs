//! Where askbus's policy files live, and the rules "allow always" writes.
