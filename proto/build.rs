//! Compiles the internal Raft transport protocol and the gnostic OpenAPI v2
//! messages the apiserver serves. The etcd v3 API comes pre-generated from
//! the `etcd-client` crate (feature `build-server`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/raftpb.proto");
    println!("cargo:rerun-if-changed=proto/openapiv2.proto");
    tonic_prost_build::configure().build_client(true).build_server(true).compile_protos(&["proto/raftpb.proto"], &["proto"])?;
    prost_build::Config::new().compile_protos(&["proto/openapiv2.proto"], &["proto"])?;
    Ok(())
}
