//! memberlist wire codec.
