//! npm registry pins and locked trees (being written).
