// Records the git revision (and whether the tree had uncommitted changes) and the compiler the
// binary was built with, for results that can be reproduced.
fn main() {
    let rev = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    // A dirty tree's revision names its changes too (a hash of `git diff HEAD`), so that
    // results of two different uncommitted states do not pass for one build.
    let rev = if dirty {
        let diff = std::process::Command::new("git")
            .args(["diff", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
            .unwrap_or_default();
        // FNV-1a: a stable name for the diff, not a security measure.
        let hash = diff.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        format!("{rev}-dirty-{:08x}", hash as u32)
    } else {
        rev
    };
    println!("cargo:rustc-env=TXLAB_GIT_REVISION={rev}");
    println!("cargo:rustc-env=TXLAB_GIT_DIRTY={dirty}");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TXLAB_RUSTC={version}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    // Edits that are not staged change the dirty state and its hash.
    for dir in ["src", "templates", "presets", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={dir}");
    }
}
