#!/usr/bin/env bash
# What `make test` runs first for the browser tests, which drive the system's Chromium at
# /usr/bin/chromium (never a browser that Playwright downloads). When it is missing, install it
# with apt-get where that is possible (run as root on Debian or Ubuntu); otherwise say in one
# line how, and carry on: without Chromium the browser tests skip (or fail, when
# TROUPE_REQUIRE_SERVICES=1).
set -u
CHROMIUM=/usr/bin/chromium
HOW="install it with \`sudo apt-get install chromium\`"

[ -x "$CHROMIUM" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Chromium is missing at $CHROMIUM: installing it for the browser tests (apt-get install chromium)"
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
      && [ -x "$CHROMIUM" ]; then
    exit 0
  fi
  HOW="apt-get could not install it (see above); install the chromium package by hand"
fi
echo "Chromium is missing at $CHROMIUM, so the browser tests will skip: $HOW."
exit 0
