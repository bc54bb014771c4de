#!/usr/bin/env bash
# Make sure Debian's Chromium is present at /usr/bin/chromium: the HTML report's browser test
# opens the page in it, headless. Idempotent: installs the `chromium` package with apt-get only
# when the binary is missing and we are root (refreshing the package lists first on a fresh
# machine), then prints the binary's path. Without it the browser test says why it cannot run.
set -euo pipefail

browser=/usr/bin/chromium

if [ ! -x "$browser" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-chromium: $browser not found and not root; run as root or: apt-get install chromium" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: $browser not found and apt-get is not available to install it" >&2
    exit 1
  fi
  echo "ensure-chromium: installing Debian's chromium package…" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine (or container) may have no package lists yet; a stale one may name
  # versions the mirror no longer has. Refresh when the first try cannot find the package.
  # fonts-dejavu-core: a machine without any font would render the page's text invisible.
  if ! apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  fi
  [ -x "$browser" ] || { echo "ensure-chromium: installed, but $browser is still missing" >&2; exit 1; }
fi
echo "$browser"
