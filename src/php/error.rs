//! Every failure of a PHP call, typed, and turned into a PHP exception in one place.
//! A denial is not here: it is a `Decision` with `allowed: false`.

use crate::keyfile::KeyError;
use crate::storage::StoreError;
use ext_php_rs::exception::PhpException;
use ext_php_rs::zend::{ce, ClassEntry};
use std::sync::atomic::{AtomicPtr, Ordering};

#[derive(Debug)]
pub enum Error {
    /// A bad argument value: PHP's `ValueError`, with the complete message.
    Value(String),
    /// A bad argument type: PHP's `TypeError`, with the complete message.
    Type(String),
    /// PHP already threw (e.g. an `ArgumentCountError` from argument parsing).
    AlreadyThrown,
    Store(StoreError),
    Key(KeyError),
    /// The per-user directory of the default location is not ours (see [`crate::trust`]).
    Untrusted(crate::trust::Untrusted),
    /// A failure inside the glue itself (a conversion that should not fail, a caught panic).
    Internal(String),
}

/// `RateLimit\Exception`, once registered at module startup.
pub static EXCEPTION_CE: AtomicPtr<ClassEntry> = AtomicPtr::new(std::ptr::null_mut());

fn exception_ce() -> &'static ClassEntry {
    // SAFETY: set once at module startup to a class entry PHP keeps for the process lifetime.
    unsafe { EXCEPTION_CE.load(Ordering::Acquire).as_ref() }.unwrap_or_else(ce::exception)
}

impl From<crate::stack::OpenError> for Error {
    fn from(e: crate::stack::OpenError) -> Self {
        use crate::stack::OpenError;
        match e {
            OpenError::Store(e) => Error::Store(e),
            OpenError::Key(e) => Error::Key(e),
            OpenError::Untrusted(e) => Error::Untrusted(e),
        }
    }
}

impl Error {
    /// Throws the matching PHP exception. The caller returns right after.
    pub fn throw(self) {
        let (msg, class) = match self {
            Error::AlreadyThrown => return,
            Error::Value(m) => (m, ce::value_error()),
            Error::Type(m) => (m, ce::type_error()),
            Error::Store(e) => (e.to_string(), exception_ce()),
            Error::Key(e) => (e.to_string(), exception_ce()),
            Error::Untrusted(e) => (e.to_string(), exception_ce()),
            Error::Internal(m) => (format!("ratelimit: internal error: {m}"), exception_ce()),
        };
        // A message with a NUL byte (a path from the system, a forged record) cannot be thrown
        // as it is, and PHP would throw a plain Error in its place.
        PhpException::new(msg.replace('\0', "\\0"), 0, class).throw();
    }
}
