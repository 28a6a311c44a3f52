#!/usr/bin/env bash
# azd postprovision: the provision succeeded, so a staged key set is now the Key Vault secret
# routelock-token-keys. Drop it from the azd environment (.azure/<env>/.env): the vault is the only
# copy, and later provisions pass no key set, which leaves the secret and its versions alone.
set -euo pipefail
HOOK_NAME=postprovision
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

if [[ -n "$(azd_value ROUTELOCK_TOKEN_KEYS_B64)" ]]; then
  if azd env set ROUTELOCK_TOKEN_KEYS_B64 ""; then
    log "the key set is in Key Vault; removed ROUTELOCK_TOKEN_KEYS_B64 from the azd environment"
  else
    log "warning: could not clear ROUTELOCK_TOKEN_KEYS_B64; remove it from .azure/<env>/.env by hand"
  fi
fi
