//! Compiles the internal Raft transport protocol and the gnostic OpenAPI v2
//! messages the apiserver serves. The etcd v3 API comes pre-generated from
//! the `etcd-client` crate (feature `build-server`), except the server side
//! of etcd's Lock, Election and Auth services, generated here (for Auth see
//! `proto/etcd/auth.proto` for why).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/raftpb.proto");
    println!("cargo:rerun-if-changed=proto/openapiv2.proto");
    println!("cargo:rerun-if-changed=proto/etcd");
    tonic_prost_build::configure().build_client(true).build_server(true).compile_protos(&["proto/raftpb.proto"], &["proto"])?;
    // etcd's lock, election and auth services, whose server side
    // etcd-client does not generate (or, for Auth, not usably). The etcd
    // messages they name are etcd-client's own types. One run, since the
    // auth service shares package etcdserverpb with the refs.
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .extern_path(".etcdserverpb.ResponseHeader", "::etcd_client::proto::PbResponseHeader")
        .extern_path(".mvccpb.KeyValue", "::etcd_client::proto::PbKeyValue")
        .compile_protos(&["proto/etcd/v3lock.proto", "proto/etcd/v3election.proto", "proto/etcd/auth.proto"], &["proto"])?;
    prost_build::Config::new().compile_protos(&["proto/openapiv2.proto"], &["proto"])?;
    Ok(())
}
