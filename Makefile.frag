# Rules for the Makefile that phpize's configure writes (config.m4 adds this file to it): cargo
# builds the extension; $(phplibdir)/ratelimit.so is what `make install` copies into
# $(INSTALL_ROOT)$(EXTENSION_DIR). Cargo decides what is stale, so the rule always asks it.
# Cargo's target dir: $CARGO_TARGET_DIR when set, else target/ in the source tree.
RATELIMIT_CARGO_TARGET_DIR = $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),$(srcdir)/target)

# The .la only tells `make test` (run-tests.php) the module's file name, as libtool's would;
# `make install` deletes it and installs the .so.
$(phplibdir)/ratelimit.la: ratelimit-cargo-build
	@mkdir -p $(phplibdir)
	cp "$(RATELIMIT_CARGO_TARGET_DIR)/release/libratelimit.$(SHLIB_SUFFIX_NAME)" "$(phplibdir)/ratelimit.$(SHLIB_DL_SUFFIX_NAME)"
	@echo "dlname='ratelimit.$(SHLIB_DL_SUFFIX_NAME)'" > $@

.PHONY: ratelimit-cargo-build
ratelimit-cargo-build:
	cd "$(srcdir)" && PHP="$(PHP_EXECUTABLE)" PHP_CONFIG="$(RATELIMIT_PHP_CONFIG)" \
	  CARGO_TARGET_DIR="$(RATELIMIT_CARGO_TARGET_DIR)" "$(CARGO)" build --release --locked --lib

# `make test`: the phpt suite against modules/ratelimit.so (./run-tests runs everything).
TESTS = $(srcdir)/php-tests
