#!/usr/bin/env bash
# azd preprovision: the API's Entra app registration (ENTRA_CLIENT_ID), then the fencing-token key set.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/entra-app.sh"
bash "$here/token-keys.sh"
