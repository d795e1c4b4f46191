//! Compiles the internal Raft transport protocol. The etcd v3 API comes
//! pre-generated from the `etcd-client` crate (feature `build-server`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/raftpb.proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/raftpb.proto"], &["proto"])?;
    Ok(())
}
