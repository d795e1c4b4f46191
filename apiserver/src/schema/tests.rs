//! Table-driven tests of the schema layer.
