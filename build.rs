//! Emits the `phpXX` cfg flags that ext-php-rs's macros rely on (e.g. for readonly classes), and
//! that `src/php/args.rs` uses to follow the engine's wording (`php83`).
fn main() -> anyhow::Result<()> {
    ext_php_rs_build::emit_check_cfg();
    // Rerun for a different PHP only, not for any file of the package: phpize's build writes
    // configure, Makefile and friends into the source tree, which would otherwise rebuild the
    // crate on every `make`.
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["PHP", "PHP_CONFIG", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if std::env::var_os("CARGO_FEATURE_PHP").is_none() {
        return Ok(());
    }
    let php = ext_php_rs_build::find_php()?;
    let info = ext_php_rs_build::PHPInfo::get(&php)?;
    let version: ext_php_rs_build::ApiVersion = info.zend_version()?.try_into()?;
    ext_php_rs_build::emit_php_cfg_flags(version);
    Ok(())
}
