//! The documentation against the code, so that neither drifts from the other:
//! - the php.ini reference in docs/configuration.md and the directive table of
//!   stubs/ratelimit.stub.php are rendered from the one table of directives (src/core/config.rs),
//!   the operations log's lines in docs/operations.md from src/opslog.rs's list, and the table of
//!   policies in docs/usage.md from core::bucket::Kind: each page
//!   holds them between `BEGIN GENERATED <name>` and `END GENERATED <name>` lines, and a test fails
//!   when what is there differs. `RATELIMIT_WRITE_DOCS=1 cargo test --no-default-features --test
//!   docs` writes them instead;
//! - the defaults shown in ratelimit.ini are the code's;
//! - the Rust version named in the README, docs/, config.m4 and composer.json is Cargo.toml's
//!   `rust-version`;
//! - every relative link of README.md, CONTRIBUTING.md and docs/*.md points to a file that
//!   exists, and its `#anchor` to a heading (or an `id`) of that file.

use ratelimit::core::config;
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Checks (or, with RATELIMIT_WRITE_DOCS=1, writes) the lines of `rel` between its
/// `BEGIN GENERATED <name>` and `END GENERATED <name>` lines against `want`.
fn generated(rel: &str, name: &str, want: &str) {
    let text = read(rel);
    let begin = format!("BEGIN GENERATED {name}");
    let end = format!("END GENERATED {name}");
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let b = lines
        .iter()
        .position(|l| l.contains(&begin))
        .unwrap_or_else(|| panic!("{rel}: no line with '{begin}'"));
    let e = lines
        .iter()
        .position(|l| l.contains(&end))
        .unwrap_or_else(|| panic!("{rel}: no line with '{end}'"));
    assert!(b < e, "{rel}: '{end}' before '{begin}'");
    let have: String = lines[b + 1..e].concat();
    if have == want {
        return;
    }
    if std::env::var_os("RATELIMIT_WRITE_DOCS").is_some_and(|v| v == "1") {
        let new = [lines[..=b].concat(), want.to_string(), lines[e..].concat()].concat();
        fs::write(root().join(rel), new).unwrap();
        eprintln!("wrote the {name} block of {rel}");
        return;
    }
    let first = have
        .lines()
        .zip(want.lines())
        .find(|(h, w)| h != w)
        .map(|(h, w)| format!("\n  page: {h}\n  code: {w}"))
        .unwrap_or_else(|| {
            format!(
                " ({} lines on the page, {} from the code)",
                have.lines().count(),
                want.lines().count()
            )
        });
    panic!(
        "{rel}: the {name} block differs from the code{first}\n\
         Rewrite it with: RATELIMIT_WRITE_DOCS=1 cargo test --no-default-features --test docs"
    );
}

#[test]
fn the_configuration_reference_is_the_directive_table() {
    generated(
        "docs/configuration.md",
        "directives",
        &config::reference_markdown(),
    );
}

#[test]
fn the_stub_lists_the_directive_table() {
    generated(
        "stubs/ratelimit.stub.php",
        "directives",
        &config::stub_table(),
    );
}

#[test]
fn the_operations_log_reference_is_the_list_of_events() {
    generated(
        "docs/operations.md",
        "opslog",
        &ratelimit::opslog::reference_markdown(),
    );
}

#[test]
fn the_usage_page_lists_the_policies() {
    generated(
        "docs/usage.md",
        "policies",
        &ratelimit::core::bucket::Kind::reference_markdown(),
    );
}

#[test]
fn every_directive_accepts_what_its_parser_says() {
    for d in config::directives() {
        let name = d.name.to_str().unwrap();
        let why = config::Config::defaults()
            .set(name, "x y!")
            .expect_err(name)
            .0;
        let said = why.strip_prefix("expected ").unwrap_or(why);
        assert!(
            d.accepts.contains(said),
            "{name}: accepts says '{}', a refused value says '{why}'",
            d.accepts
        );
        for text in [d.accepts, d.doc, d.backend] {
            assert!(
                !text.contains('|') && !text.contains("*/") && !text.contains('\n'),
                "{name}: no '|', '*/' or newline in a table cell: {text}"
            );
        }
    }
}

#[test]
fn ratelimit_ini_shows_the_code_defaults() {
    let ini = read("ratelimit.ini");
    let mut seen = 0;
    for line in ini.lines() {
        let Some(rest) = line.strip_prefix(";ratelimit.") else {
            continue;
        };
        let (name, value) = rest.split_once('=').expect(line);
        let name = format!("ratelimit.{}", name.trim());
        let d = config::directives()
            .find(|d| d.name.to_str().unwrap() == name)
            .unwrap_or_else(|| panic!("ratelimit.ini names {name}, which is no directive"));
        let default = d.default.to_str().unwrap();
        // An empty default is shown by an example value (a path, say).
        if !default.is_empty() {
            assert_eq!(value.trim(), default, "ratelimit.ini: {line}");
            seen += 1;
        }
    }
    assert!(seen >= 8, "ratelimit.ini lists the defaults ({seen} found)");
}

/// The `1.NN` after each "Rust " in `text`.
fn rust_versions(text: &str) -> Vec<String> {
    text.match_indices("Rust ")
        .filter_map(|(i, m)| {
            let v: String = text[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let v = v.trim_end_matches('.').to_string();
            v.starts_with("1.").then_some(v)
        })
        .collect()
}

#[test]
fn the_rust_version_named_everywhere_is_cargo_tomls() {
    let cargo = read("Cargo.toml");
    let want = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("Cargo.toml has a rust-version")
        .trim_matches('"')
        .to_string();
    let mut files = vec![
        "README.md".to_string(),
        "config.m4".to_string(),
        "composer.json".to_string(),
        "CONTRIBUTING.md".to_string(),
    ];
    files.extend(md_files_in("docs"));
    let mut named = HashSet::new();
    for f in &files {
        for v in rust_versions(&read(f)) {
            assert_eq!(
                v, want,
                "{f} names Rust {v}; Cargo.toml's rust-version is {want}"
            );
            named.insert(f.clone());
        }
    }
    for f in ["config.m4", "composer.json", "docs/install.md"] {
        assert!(named.contains(f), "{f} names no Rust version");
    }
}

fn md_files_in(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    out.sort();
    out
}

/// The lines of `md` outside fenced code blocks.
fn unfenced(md: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    md.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The text of `md` outside fenced code blocks and inline code.
fn prose(md: &str) -> String {
    let mut out = String::new();
    for line in unfenced(md) {
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of `[text](target)` links in `md`.
fn links(md: &str) -> Vec<String> {
    let text = prose(md);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(j) = after.find(')') else { break };
        let target = after[..j].split_whitespace().next().unwrap_or("");
        out.push(target.to_string());
        rest = &after[j..];
    }
    out
}

/// GitHub's anchors of the headings of `md` (and explicit `id="..."`).
fn anchors(md: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for line in unfenced(md) {
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim_start_matches('#').trim();
            let slug: String = h
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            let mut s = slug.clone();
            let mut n = 0;
            while out.contains(&s) {
                n += 1;
                s = format!("{slug}-{n}");
            }
            out.insert(s);
        }
        let mut rest = line;
        while let Some(i) = rest.find("id=\"") {
            let after = &rest[i + 4..];
            let Some(j) = after.find('"') else { break };
            out.insert(after[..j].to_string());
            rest = &after[j..];
        }
    }
    out
}

#[test]
fn every_relative_link_points_to_a_file_and_anchor_that_exist() {
    let mut files = vec!["README.md".to_string(), "CONTRIBUTING.md".to_string()];
    files.extend(md_files_in("docs"));
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let md = read(f);
        let dir = Path::new(f).parent().unwrap();
        for target in links(&md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                PathBuf::from(f)
            } else {
                dir.join(path)
            };
            checked += 1;
            let full = root().join(&file);
            if !full.exists() {
                bad.push(format!("{f}: ({target}): no {}", file.display()));
                continue;
            }
            if let Some(a) = anchor {
                let ok = full.extension().is_some_and(|e| e == "md")
                    && anchors(&fs::read_to_string(&full).unwrap()).contains(a);
                if !ok {
                    bad.push(format!("{f}: ({target}): no #{a} in {}", file.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
    assert!(checked > 20, "only {checked} relative links found");
}
