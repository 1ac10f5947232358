//! Compiles proto/sluice/v1/sluice.proto (at the repository's root, where clients in other
//! languages find it) into the messages, the server trait and the client, and writes its encoded
//! descriptors for the server's reflection service.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("sluice/v1/sluice.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let descriptors = protox::compile([&file], [&root])?;
    // The encoded descriptors, for the reflection service (`FILE_DESCRIPTOR_SET`).
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("sluice_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
