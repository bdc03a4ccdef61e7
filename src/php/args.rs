//! Argument handling with PHP's own rules: declared parameters (for Reflection and named
//! arguments), coercion through the engine's own `zend_parse_arg_*_slow` functions (so weak and
//! strict mode, deprecations and messages are exactly those of built-in functions), and
//! `ValueError` texts in PHP's style.

use super::error::Error;
use ext_php_rs::args::Arg;
use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::ffi::{zend_long, zend_string, zval};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::Zval;
use ext_php_rs::zend::ExecuteData;

// Exported by every PHP 8.1-8.4 binary with these signatures (ZEND_FASTCALL is empty on
// x86-64 and aarch64; newer headers make two `zval *` parameters `const`, the same ABI).
// Declared here because ext-php-rs does not bind them.
unsafe extern "C" {
    fn zend_parse_arg_str_slow(arg: *mut zval, dest: *mut *mut zend_string, arg_num: u32) -> bool;
    fn zend_parse_arg_long_slow(arg: *mut zval, dest: *mut zend_long, arg_num: u32) -> bool;
    fn zend_parse_arg_double_slow(arg: *mut zval, dest: *mut f64, arg_num: u32) -> bool;
    fn zend_wrong_parameter_type_error(num: u32, expected_type: u32, arg: *mut zval);
}

// What a TypeError calls the value it was given. PHP 8.3 names a bool by its value ("true
// given") through zend_zval_value_name, which 8.1 and 8.2 do not export (they say "bool given"
// through zend_zval_type_name, which 8.3+ keeps for other uses). The PHP this build is compiled
// against decides (build.rs sets `php83` for 8.3 and later); the module API check keeps a build
// from loading into another PHP version, so the symbol exists wherever the .so runs.
#[cfg(php83)]
unsafe extern "C" {
    fn zend_zval_value_name(arg: *const zval) -> *const std::ffi::c_char;
}
#[cfg(not(php83))]
unsafe extern "C" {
    fn zend_zval_type_name(arg: *const zval) -> *const std::ffi::c_char;
}

/// The engine's name for `z` in "…, X given": a type, a class name, or on 8.3+ `true`/`false`.
///
/// # Safety
/// `z` must point to a valid zval.
unsafe fn engine_value_name(z: *const zval) -> *const std::ffi::c_char {
    // SAFETY: the caller passes a valid zval; both functions only read it and return a static
    // string or the name of the zval's class, which outlives the call.
    #[cfg(php83)]
    unsafe {
        zend_zval_value_name(z)
    }
    #[cfg(not(php83))]
    unsafe {
        zend_zval_type_name(z)
    }
}

/// The engine's name for the type of `z` in "…, X given" (for values inside an array
/// argument, which the engine does not check itself).
pub fn value_name(z: &Zval) -> String {
    let z: *const Zval = z;
    // SAFETY: `z` is a valid zval for the duration of this call; the name returned is a
    // NUL-terminated string that outlives this statement (static, or the zval's class name),
    // copied at once.
    unsafe {
        std::ffi::CStr::from_ptr(engine_value_name(z.cast()))
            .to_string_lossy()
            .into_owned()
    }
}

/// One declared parameter.
pub struct Param {
    pub name: &'static str,
    pub ty: DataType,
    pub nullable: bool,
    /// PHP source of the default; `None` for a required parameter.
    pub default: Option<&'static str>,
}

pub const fn param(
    name: &'static str,
    ty: DataType,
    nullable: bool,
    default: Option<&'static str>,
) -> Param {
    Param {
        name,
        ty,
        nullable,
        default,
    }
}

/// A function declared from its parameter list.
pub fn declare(
    name: &'static str,
    handler: extern "C" fn(&mut ExecuteData, &mut Zval),
    params: &[Param],
    returns: DataType,
) -> FunctionBuilder<'static> {
    let mut b = FunctionBuilder::new(name, handler);
    for p in params {
        let mut a = Arg::new(p.name, p.ty);
        if p.nullable {
            a = a.allow_null();
        }
        if let Some(d) = p.default {
            a = a.default(d);
        }
        b = b.arg(a);
    }
    b.required_args(params.iter().filter(|p| p.default.is_none()).count())
        .returns(returns, false, false)
}

/// The arguments of one call, checked for count, read by position.
pub struct Call {
    pub func: &'static str,
    params: &'static [Param],
    zvals: Vec<Option<*mut Zval>>,
}

impl Call {
    /// Reads the arguments; a wrong count has already thrown PHP's `ArgumentCountError`.
    /// Reads the call frame directly (what ext-php-rs's `ArgParser` does, without building an
    /// `Arg`, and allocating its name, for each declared parameter on every call).
    pub fn new(
        ex: &mut ExecuteData,
        func: &'static str,
        params: &'static [Param],
    ) -> Result<Self, Error> {
        // SAFETY: every member of the `u2` union is a u32; for a call frame it is the count.
        let passed = unsafe { ex.This.u2.num_args } as usize;
        let required = params.iter().filter(|p| p.default.is_none()).count();
        if passed < required || passed > params.len() {
            // SAFETY: called from within this internal function's frame, as PHP's own
            // ZEND_PARSE_PARAMETERS does; it reads the count from the current frame and throws.
            unsafe {
                ext_php_rs::ffi::zend_wrong_parameters_count_error(
                    required as u32,
                    params.len() as u32,
                )
            };
            return Err(Error::AlreadyThrown);
        }
        // The zvals live in the call frame, which outlives this call of the handler.
        let zvals = (0..passed)
            // SAFETY: i < num_args, so the slot is one of this frame's arguments.
            .map(|i| unsafe { ex.zend_call_arg(i) }.map(|z| z as *mut Zval))
            .collect();
        Ok(Self {
            func,
            params,
            zvals,
        })
    }

    fn zval(&self, i: usize) -> Option<*mut Zval> {
        self.zvals.get(i).copied().flatten()
    }

    fn is_null(&self, i: usize) -> bool {
        // SAFETY: pointers from `new` stay valid for the duration of the handler.
        self.zval(i).is_none_or(|z| unsafe { (*z).is_null() })
    }

    /// `Argument #N ($name) ` with the function prefix, as PHP writes it.
    pub fn prefix(&self, i: usize) -> String {
        format!(
            "{}(): Argument #{} (${})",
            self.func,
            i + 1,
            self.params[i].name
        )
    }

    pub fn value_error(&self, i: usize, what: &str) -> Error {
        Error::Value(format!("{} {what}", self.prefix(i)))
    }

    /// PHP's own TypeError for parameter `i` of the given expected type (a `Z_EXPECTED_*`).
    fn type_error(&self, i: usize, expected: u32) -> Error {
        if let Some(z) = self.zval(i) {
            // SAFETY: a valid zval of this call; the engine formats and throws the TypeError.
            unsafe { zend_wrong_parameter_type_error(i as u32 + 1, expected, z.cast()) };
        }
        Error::AlreadyThrown
    }

    /// A TypeError for a type the engine has no `Z_EXPECTED_*` for (a union), worded as the
    /// running engine words its own ("bool given" up to 8.2, "true given" since 8.3).
    pub fn type_error_text(&self, i: usize, expected: &str) -> Error {
        // SAFETY: a valid zval of this call; the name returned is a NUL-terminated string that
        // outlives this statement (static, or the name of the zval's class), copied at once.
        let given = self.zval(i).map_or("null".into(), |z| unsafe {
            std::ffi::CStr::from_ptr(engine_value_name(z.cast()))
                .to_string_lossy()
                .into_owned()
        });
        Error::Type(format!(
            "{} must be of type {expected}, {given} given",
            self.prefix(i)
        ))
    }

    /// A string parameter, coerced as PHP coerces.
    pub fn string(&self, i: usize) -> Result<Vec<u8>, Error> {
        let Some(z) = self.zval(i) else {
            return Ok(self.params[i]
                .default
                .unwrap_or("")
                .trim_matches('"')
                .as_bytes()
                .to_vec());
        };
        // SAFETY: valid zval of this call; the slow path converts it in place on success.
        unsafe {
            if !(*z).is_string() {
                let mut s: *mut zend_string = std::ptr::null_mut();
                if !zend_parse_arg_str_slow(z.cast(), &mut s, i as u32 + 1) {
                    return Err(self.type_error(
                        i,
                        expected(
                            ext_php_rs::ffi::_zend_expected_type_Z_EXPECTED_STRING,
                            self.params[i].nullable,
                        ),
                    ));
                }
                let s = s.cast::<ext_php_rs::types::ZendStr>().as_ref();
                return s.map(|s| s.as_bytes().to_vec()).ok_or(Error::AlreadyThrown);
            }
            Ok((*z)
                .zend_str()
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_default())
        }
    }

    /// A `?string` parameter: `None` for null or omitted.
    pub fn nullable_string(&self, i: usize) -> Result<Option<Vec<u8>>, Error> {
        if self.zval(i).is_none() || self.is_null(i) {
            return Ok(None);
        }
        self.string(i).map(Some)
    }

    /// An int parameter (`?int` when declared nullable; `None` for null or omitted).
    pub fn long(&self, i: usize) -> Result<Option<i64>, Error> {
        let nullable = self.params[i].nullable;
        let Some(z) = self.zval(i) else {
            return Ok(self.params[i].default.and_then(|d| d.parse().ok()));
        };
        if nullable && self.is_null(i) {
            return Ok(None);
        }
        // SAFETY: valid zval of this call.
        unsafe {
            if let Some(v) = (*z).long() {
                return Ok(Some(v));
            }
            let mut v: zend_long = 0;
            if !zend_parse_arg_long_slow(z.cast(), &mut v, i as u32 + 1) {
                return Err(self.type_error(
                    i,
                    expected(
                        ext_php_rs::ffi::_zend_expected_type_Z_EXPECTED_LONG,
                        nullable,
                    ),
                ));
            }
            Ok(Some(v))
        }
    }

    /// A `?float` parameter.
    pub fn double(&self, i: usize) -> Result<Option<f64>, Error> {
        let nullable = self.params[i].nullable;
        let Some(z) = self.zval(i) else {
            return Ok(None);
        };
        if nullable && self.is_null(i) {
            return Ok(None);
        }
        // SAFETY: valid zval of this call.
        unsafe {
            if let Some(v) = (*z).double() {
                return Ok(Some(v));
            }
            let mut v = 0f64;
            if !zend_parse_arg_double_slow(z.cast(), &mut v, i as u32 + 1) {
                return Err(self.type_error(
                    i,
                    expected(
                        ext_php_rs::ffi::_zend_expected_type_Z_EXPECTED_DOUBLE,
                        nullable,
                    ),
                ));
            }
            Ok(Some(v))
        }
    }

    /// An array parameter (never null, never omitted: the caller declares it required).
    pub fn array(&self, i: usize) -> Result<&ext_php_rs::types::ZendHashTable, Error> {
        let Some(z) = self.zval(i) else {
            return Err(Error::Internal("missing argument".into()));
        };
        // SAFETY: valid zval of this call.
        match unsafe { (*z).array() } {
            Some(a) => Ok(a),
            None => Err(self.type_error(
                i,
                expected(ext_php_rs::ffi::_zend_expected_type_Z_EXPECTED_ARRAY, false),
            )),
        }
    }

    /// The raw zval of parameter `i`, for union types handled by the caller.
    pub fn raw(&self, i: usize) -> Option<&Zval> {
        // SAFETY: valid zval of this call.
        self.zval(i).map(|z| unsafe { &*z })
    }

    /// Coerces parameter `i` to a string the way a `T|string` union does in weak mode.
    pub fn string_weak(&self, i: usize) -> Option<Vec<u8>> {
        let z = self.zval(i)?;
        let mut s: *mut zend_string = std::ptr::null_mut();
        // SAFETY: valid zval of this call; fails in strict mode, as unions do.
        unsafe {
            if !zend_parse_arg_str_slow(z.cast(), &mut s, i as u32 + 1) {
                return None;
            }
            s.cast::<ext_php_rs::types::ZendStr>()
                .as_ref()
                .map(|s| s.as_bytes().to_vec())
        }
    }
}

/// The engine lists each `Z_EXPECTED_X` directly followed by `Z_EXPECTED_X_OR_NULL`.
fn expected(base: u32, nullable: bool) -> u32 {
    base + u32::from(nullable)
}
