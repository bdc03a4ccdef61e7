dnl config.m4 for ratelimit, so that the usual
dnl   phpize && ./configure && make && make install
dnl (what PECL and PIE run) builds the extension with cargo against the PHP of the php-config
dnl found (./configure --with-php-config=PATH picks another), and installs modules/ratelimit.so
dnl into that PHP's extension dir. The extension is Rust: nothing here compiles C.

PHP_ARG_ENABLE([ratelimit],
  [whether to enable ratelimit (host-wide rate limits in one SQLite file)],
  [AS_HELP_STRING([--disable-ratelimit], [Do not build ratelimit])],
  [yes], [no])

PHP_ARG_WITH([cargo], [for the cargo to build ratelimit with],
  [AS_HELP_STRING([--with-cargo=PATH],
    [Path to cargo (Rust 1.89 or newer) [cargo on PATH, else ~/.cargo/bin/cargo]])],
  [no], [no])

if test "$PHP_RATELIMIT" != "no"; then
  dnl cargo: --with-cargo, else $CARGO, else PATH, else rustup's default place (sudo or PIE
  dnl often run without ~/.cargo/bin on PATH).
  if test "$PHP_CARGO" != "no" && test "$PHP_CARGO" != "yes"; then
    CARGO=$PHP_CARGO
  fi
  AC_PATH_PROG([CARGO], [cargo], [no], [$PATH:$HOME/.cargo/bin])
  if ! test -x "$CARGO"; then
    AC_MSG_ERROR([cargo not found: install Rust (https://rustup.rs) or pass --with-cargo=PATH])
  fi
  AC_MSG_CHECKING([cargo version])
  ratelimit_cargo_version=`"$CARGO" --version 2>/dev/null`
  if test -z "$ratelimit_cargo_version"; then
    AC_MSG_ERROR([$CARGO --version failed])
  fi
  AC_MSG_RESULT([$ratelimit_cargo_version])

  dnl ext-php-rs reads the PHP to build against from $PHP and $PHP_CONFIG, and wants them as
  dnl paths: make the php-config phpize's configure uses absolute.
  case $PHP_CONFIG in
    */*) RATELIMIT_PHP_CONFIG=$PHP_CONFIG ;;
    *) AC_PATH_PROG([RATELIMIT_PHP_CONFIG], [$PHP_CONFIG], [no]) ;;
  esac
  if ! test -x "$RATELIMIT_PHP_CONFIG" || ! test -x "$PHP_EXECUTABLE"; then
    AC_MSG_ERROR([php-config ($PHP_CONFIG) or the php it names ($PHP_EXECUTABLE) not found])
  fi
  AC_MSG_CHECKING([for the PHP ratelimit is built against])
  AC_MSG_RESULT([`"$PHP_EXECUTABLE" -n -r 'echo PHP_VERSION, PHP_ZTS ? " ZTS" : " NTS";' 2>/dev/null` ($PHP_EXECUTABLE)])

  dnl No PHP_NEW_EXTENSION: there is no C to compile. The module phpize's Makefile builds and
  dnl installs is made by the rules of Makefile.frag, which run cargo.
  PHP_MODULES="\$(phplibdir)/ratelimit.la"
  PHP_SUBST(CARGO)
  PHP_SUBST(RATELIMIT_PHP_CONFIG)
  PHP_ADD_MAKEFILE_FRAGMENT([$abs_srcdir/Makefile.frag], [$abs_srcdir], [$abs_builddir])
fi
