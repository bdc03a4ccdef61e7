//! `ratelimit_acquire_all()`: the arguments of a compound call, checked element by element
//! with the texts `ratelimit_acquire()` gives for each argument, naming the element's index
//! (`Argument #2 ($limits) [1]["per"] must be ...`).

use super::args::{value_name, Call};
use super::error::Error;
use super::{per_error, scope_error};
use crate::core::bucket::{Kind, Policy, MAX_LIMIT};
use crate::core::compound::MAX_LIMITS;
use crate::core::subject;
use ext_php_rs::types::{ArrayKey, Zval};

/// One element of `$limits`.
pub struct Limit {
    pub policy: Policy,
    pub scope: String,
}

const KEYS: [&str; 5] = ["limit", "per", "scope", "policy", "amount"];

/// The limits of argument `i`: a list of 1 to [`MAX_LIMITS`] arrays, each with exactly the keys
/// "limit" (int), "per" (int|float, seconds) and "scope" (string), scopes all different, and
/// optionally "policy" (string, `token_bucket` when absent: each limit counts its own way) and
/// "amount" (int, a `stepped_bucket`'s tokens per step, `limit` when absent). Values
/// inside the array are not coerced (no engine rule applies to them): a wrong type is a
/// TypeError, as a strict-mode argument would be.
pub fn limits_arg(call: &Call, i: usize) -> Result<Vec<Limit>, Error> {
    let table = call.array(i)?;
    let arg = call.prefix(i);
    if table.is_empty() || table.len() > MAX_LIMITS {
        return Err(Error::Value(format!(
            "{arg} must contain 1 to {MAX_LIMITS} limits"
        )));
    }
    if !table.has_sequential_keys() {
        return Err(Error::Value(format!("{arg} must be a list")));
    }
    let mut out: Vec<Limit> = Vec::with_capacity(table.len());
    for (n, element) in table.values().enumerate() {
        let at = format!("{arg} [{n}]");
        let element = element.dereference();
        let Some(fields) = element.array() else {
            return Err(Error::Type(format!(
                "{at} must be of type array, {} given",
                value_name(element)
            )));
        };
        for (key, _) in fields.iter() {
            let known = match &key {
                ArrayKey::Long(_) => false,
                other => KEYS.contains(&other.to_string().as_str()),
            };
            if !known {
                return Err(Error::Value(format!(
                    "{at} must have only the keys \"limit\", \"per\", \"scope\", \"policy\" \
                     and \"amount\""
                )));
            }
        }
        let field = |name: &str| -> Result<&Zval, Error> {
            fields
                .get(name)
                .map(Zval::dereference)
                .ok_or_else(|| Error::Value(format!("{at} must have a \"{name}\" key")))
        };
        let (limit, per, scope) = (field("limit")?, field("per")?, field("scope")?);
        let type_error = |name: &str, expected: &str, z: &Zval| {
            Error::Type(format!(
                "{at}[\"{name}\"] must be of type {expected}, {} given",
                value_name(z)
            ))
        };
        let value_error = |name: &str, what: &str| Error::Value(format!("{at}[\"{name}\"] {what}"));
        let limit = match limit.long() {
            None => return Err(type_error("limit", "int", limit)),
            Some(l) if l < 1 => return Err(value_error("limit", "must be greater than 0")),
            Some(l) if l as u64 > MAX_LIMIT => {
                return Err(value_error(
                    "limit",
                    &format!("must be less than or equal to {MAX_LIMIT}"),
                ))
            }
            Some(l) => l as u64,
        };
        let per = match (per.long(), per.double()) {
            (Some(l), _) => l as f64,
            (None, Some(d)) => d,
            (None, None) => return Err(type_error("per", "int|float", per)),
        };
        if let Some(what) = per_error(per) {
            return Err(value_error("per", what));
        }
        let per_ms = Policy::per_ms_from_seconds(per).expect("bounds checked above");
        let Some(scope_str) = scope.zend_str() else {
            return Err(type_error("scope", "string", scope));
        };
        let scope_bytes = scope_str.as_bytes();
        if !subject::valid_scope(scope_bytes) {
            return Err(value_error("scope", scope_error()));
        }
        let scope = String::from_utf8(scope_bytes.to_vec()).expect("a valid scope is ASCII");
        if let Some(first) = out.iter().position(|l| l.scope == scope) {
            return Err(value_error(
                "scope",
                &format!("must not repeat the scope of [{first}]"),
            ));
        }
        let kind = match fields.get("policy").map(Zval::dereference) {
            None => Kind::TokenBucket,
            Some(z) => {
                let Some(name) = z.zend_str() else {
                    return Err(type_error("policy", "string", z));
                };
                Kind::from_name(name.as_bytes())
                    .ok_or_else(|| value_error("policy", &super::policy_error()))?
            }
        };
        let mut policy = Policy::new(limit, per_ms)
            .map_err(|e| Error::Internal(format!("{e:?}")))?
            .with_kind(kind);
        if let Some(z) = fields.get("amount").map(Zval::dereference) {
            let Some(amount) = z.long() else {
                return Err(type_error("amount", "int", z));
            };
            if kind != Kind::SteppedBucket {
                return Err(value_error(
                    "amount",
                    "must not be given unless \"policy\" is \"stepped_bucket\"",
                ));
            }
            if amount < 1 {
                return Err(value_error("amount", "must be greater than 0"));
            }
            policy = policy.with_amount(amount as u64).map_err(|_| {
                value_error(
                    "amount",
                    &format!("must be less than or equal to {MAX_LIMIT}"),
                )
            })?;
        }
        out.push(Limit { policy, scope });
    }
    Ok(out)
}
