//! RocksDB is C++. Linked prebuilt (scripts/lib.sh sets ROCKSDB_LIB_DIR), librocksdb-sys
//! skips the compile step that would also name the C++ runtime, so this crate's library
//! names it; every binary of the crate links the library (the fuzz targets would get the
//! runtime from libFuzzer too, the seed writer would not).
fn main() {
    println!("cargo:rustc-link-lib=stdc++");
}
