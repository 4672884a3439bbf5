#!/bin/sh
# Make sure Debian's Chromium is installed for the real-browser test
# (tests/jupyter/test_browser.py). Playwright's own browser download does not
# work offline, so the test launches /usr/bin/chromium instead.
set -e
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
test -x /usr/bin/chromium
