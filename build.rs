//! Emits the `phpXX` cfg flags that ext-php-rs's macros rely on (e.g. for readonly classes).
fn main() -> anyhow::Result<()> {
    ext_php_rs_build::emit_check_cfg();
    if std::env::var_os("CARGO_FEATURE_PHP").is_none() {
        return Ok(());
    }
    let php = ext_php_rs_build::find_php()?;
    let info = ext_php_rs_build::PHPInfo::get(&php)?;
    let version: ext_php_rs_build::ApiVersion = info.zend_version()?.try_into()?;
    ext_php_rs_build::emit_php_cfg_flags(version);
    Ok(())
}
