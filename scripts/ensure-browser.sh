#!/usr/bin/env bash
# Set-up step of `npm test` (its `pretest`): the status-page browser test drives a real Chromium.
# Use ROUTELOCK_CHROMIUM or Debian's /usr/bin/chromium when present; otherwise install Debian's chromium
# package (as root, or with passwordless sudo). Never a silent skip: if no browser can be had, say how.
set -euo pipefail
browser="${ROUTELOCK_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$browser" ]; then
  exit 0
fi
if [ -n "${ROUTELOCK_CHROMIUM:-}" ]; then
  echo "ensure-browser: ROUTELOCK_CHROMIUM=$ROUTELOCK_CHROMIUM is not an executable file" >&2
  exit 1
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    as_root=(false)
  fi
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "${as_root[0]:-}" = false ]; then
  cat >&2 <<'MSG'
ensure-browser: the status-page test needs Chromium and none was found at /usr/bin/chromium.
Install it (Debian/Ubuntu: `sudo apt-get install chromium`) or point ROUTELOCK_CHROMIUM at a Chromium or
Chrome binary, then run `npm test` again.
MSG
  exit 1
fi
echo "ensure-browser: installing Debian's chromium for the status-page browser test"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
[ -x /usr/bin/chromium ] || { echo "ensure-browser: apt-get ran but /usr/bin/chromium is missing" >&2; exit 1; }
