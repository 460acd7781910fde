//! The library's layers call only downward. Each top-level folder of
//! `src/` is a layer (the launcher is another crate of the workspace); a
//! file may name (`crate::x`, `$crate::x`, `use crate::{x, ..}`) only its
//! own layer and the layers this table allows it. The table is the
//! architecture of docs/ARCHITECTURE.md. `sys` is a crate of its own
//! (`mpistages-sys`, re-exported as `crate::sys`), as is the control
//! vocabulary (`mpistages-control`, re-exported inside `control`): Cargo
//! keeps them from calling up.

use std::collections::BTreeSet;
use std::path::Path;

/// Each layer, and the layers below it that it may call.
const LAYERS: &[(&str, &[&str])] = &[
    // The C and Fortran entry points see the API only.
    ("abi", &["api"]),
    (
        "api",
        &[
            "coll",
            "stages",
            "checkpoint",
            "inject",
            "progress",
            "control",
            "transport",
            "sys",
        ],
    ),
    // Collectives move bytes through the engine.
    ("coll", &["progress", "transport", "sys"]),
    // The Stages protocol: checkpoints, the engine's rejoin, notices.
    (
        "stages",
        &["checkpoint", "inject", "progress", "control", "sys"],
    ),
    ("checkpoint", &["sys"]),
    ("inject", &["control", "sys"]),
    ("progress", &["control", "transport", "sys"]),
    ("control", &["sys"]),
    ("transport", &["sys"]),
    ("sys", &[]),
];

/// Layers that are crates of their own, not folders of `src/`.
const CRATES: &[&str] = &["sys"];

/// The layers `text` (a file of layer `own`) names but may not.
fn violations(own: &str, text: &str) -> BTreeSet<String> {
    let allowed = LAYERS
        .iter()
        .find(|(l, _)| *l == own)
        .map(|(_, a)| *a)
        .unwrap_or_else(|| panic!("src/{own} is not in the layer table"));
    let mut named = BTreeSet::new();
    for line in text.lines() {
        // Comments may mention any layer.
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let first = item.trim().split("::").next().unwrap_or("");
                    named.insert(first.to_string());
                }
            } else {
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                named.insert(ident);
            }
        }
    }
    named
        .into_iter()
        .filter(|n| !n.is_empty() && n != own && LAYERS.iter().any(|(l, _)| l == n))
        .filter(|n| !allowed.contains(&n.as_str()))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_layer_calls_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    let mut layers_seen = BTreeSet::new();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        // src/lib.rs only lists the layers.
        if !p.is_dir() {
            continue;
        }
        layers_seen.insert(name.clone());
        let mut files = Vec::new();
        rust_files(&p, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for v in violations(&name, &text) {
                bad.push(format!(
                    "{} ({name}) uses crate::{v}",
                    f.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    let table: BTreeSet<String> = LAYERS
        .iter()
        .map(|(l, _)| l.to_string())
        .filter(|l| !CRATES.contains(&l.as_str()))
        .collect();
    assert_eq!(
        layers_seen, table,
        "src/ folders and the layer table differ"
    );
    assert!(
        bad.is_empty(),
        "upward or sideways calls:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_catches_an_upward_import() {
    let upward = "use crate::api::consts::PROC_NULL;\n";
    assert_eq!(
        violations("progress", upward),
        BTreeSet::from(["api".into()])
    );
    let grouped = "use crate::{coll, sys::epoll::Epoll};\n";
    assert_eq!(
        violations("transport", grouped),
        BTreeSet::from(["coll".into()])
    );
    let in_macro = "if $crate::stages::counting_calls() {}\n";
    assert_eq!(
        violations("abi", in_macro),
        BTreeSet::from(["stages".into()])
    );
    let commented = "// see crate::api for the error classes\n";
    assert!(violations("progress", commented).is_empty());
    let allowed = "use crate::sys::socket::NoSignal;\nuse crate::progress::Engine;\n";
    assert!(violations("coll", allowed).is_empty());
}
