#!/usr/bin/env bash
# azd postdeploy: prove the deployed app refuses unauthenticated callers.
#
# While Flex Consumption was in preview, Microsoft documented that App Service authentication was not
# supported there and that "unauthenticated callers currently aren't blocked when EasyAuth is enabled":
# a silent failure. So after every deployment: a request without a token (and with a forged
# x-ms-client-principal header) must get 401, and /api/health must answer without one.
set -euo pipefail
HOOK_NAME=postdeploy
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

require curl
uri="$(azd_value SERVICE_API_URI)"
[[ -n "$uri" ]] || die "SERVICE_API_URI is not set (an output of infra/bicep/main.bicep)"
uri="${uri%/}"

# A principal that claims every role; App Service authentication must strip it and answer 401.
forged="$(printf '{"auth_typ":"aad","claims":[{"typ":"oid","val":"00000000-0000-0000-0000-000000000000"},{"typ":"roles","val":"Routes.Read"}]}' | base64 | tr -d '\n')"

# HTTP status of a GET, retried while the app starts (no answer, or 5xx) for up to ~3 minutes.
status_of() {
  local code attempt
  for attempt in $(seq 1 18); do
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$@" || true)"
    if [[ "$code" != "000" && "$code" != 5* ]]; then
      printf '%s' "$code"
      return 0
    fi
    sleep 10
  done
  printf '%s' "$code"
}

health="$(status_of "$uri/api/health")"
[[ "$health" == "200" ]] || die "GET /api/health answered $health, expected 200 without a token"

unauthenticated="$(status_of -H "x-ms-client-principal: $forged" "$uri/api/routes/postdeploy-auth-check")"
[[ "$unauthenticated" == "401" ]] ||
  die "GET /api/routes/… without a token answered $unauthenticated, expected 401: App Service authentication is not enforcing. Stop the app (az functionapp stop) until it is."
log "unauthenticated requests get 401; /api/health is open"

# The status page's path is excluded from the 401 (it signs a browser in itself): there App Service must
# still strip a forged principal, so the app sees no identity and sends the browser to sign in (302). A 200
# would mean the forged header reached the app on an excluded path. Its reads keep the 401.
# Under ROUTELOCK_AUTH=entra the page is not excluded (no browser sign-in): it answers 401 like the API.
auth_mode="$(azd_value ROUTELOCK_AUTH)"
auth_mode="${auth_mode:-appservice}"
forged_reader="$(printf '{"auth_typ":"aad","claims":[{"typ":"oid","val":"00000000-0000-0000-0000-000000000000"},{"typ":"roles","val":"Ops.Read"}]}' | base64 | tr -d '\n')"
page="$(status_of -H "x-ms-client-principal: $forged_reader" "$uri/api/status")"
if [[ "$auth_mode" == "entra" ]]; then
  [[ "$page" == "401" ]] ||
    die "GET /api/status with a forged x-ms-client-principal answered $page, expected 401 under ROUTELOCK_AUTH=entra. Stop the app (az functionapp stop) until it does."
  log "ROUTELOCK_AUTH=entra: the status page answers 401 to a caller without a token, a forged principal included"
  exit 0
fi
[[ "$page" == "302" ]] ||
  die "GET /api/status with a forged x-ms-client-principal answered $page, expected 302 to /.auth/login/aad: App Service authentication did not strip the header on an excluded path. Stop the app (az functionapp stop) until it does."
location="$(curl -s -o /dev/null -w '%{redirect_url}' --max-time 20 -H "x-ms-client-principal: $forged_reader" "$uri/api/status" || true)"
[[ "$location" == "$uri/.auth/login/aad?post_login_redirect_uri=%2Fapi%2Fstatus%3FsignedIn%3D1" ]] ||
  die "GET /api/status redirected to '$location', expected this app's /.auth/login/aad"
reads="$(status_of -H "x-ms-client-principal: $forged_reader" "$uri/api/ops/view/migrations")"
[[ "$reads" == "401" ]] ||
  die "GET /api/ops/view/migrations without a session answered $reads, expected 401"
log "the status page sends a caller with no identity to sign in, a forged principal included; its reads get 401"
