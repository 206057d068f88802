//! MCP server records for pack.lock (being written).
