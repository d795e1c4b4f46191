//! raftstore
