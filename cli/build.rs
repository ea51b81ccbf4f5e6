//! Embeds proto/schema/ in the `askbus` binary (for `askbus schema`): writes a table of every
//! `*.schema.json` under it, each pulled in with `include_str!` so an edited schema rebuilds,
//! and reruns when a schema is added or removed.

use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/schema");
    println!("cargo:rerun-if-changed=../proto/schema");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut out = String::from(
        "/// Every JSON Schema under proto/schema/: (path under it without `.schema.json`, text).\n\
         pub static SCHEMAS: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("under the root")
            .to_str()
            .expect("schema paths are UTF-8")
            .trim_end_matches(".schema.json")
            .to_owned();
        out.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(dest.join("schemas.rs"), out).expect("write schemas.rs");
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.to_str().is_some_and(|p| p.ends_with(".schema.json")) {
            files.push(path);
        }
    }
}
