#!/usr/bin/env bash
# azd preprovision hook: the routelock API's Microsoft Entra app registration.
#
# Idempotent. When ENTRA_CLIENT_ID is not set in the azd environment, it finds the registration by its
# display name (routelock-api-<AZURE_ENV_NAME>, or ENTRA_APP_DISPLAY_NAME) or creates it, then stores
# ENTRA_CLIENT_ID. Either way it brings the registration in line with infra/entra/app-roles.json:
#   - identifier URI api://<appId>, access tokens v2 (iss https://login.microsoftonline.com/<tenant>/v2.0,
#     aud <appId>) to match the issuer App Service authentication is configured with;
#   - the app roles and the user_impersonation scope of the manifest. A role or scope that is no longer
#     in the manifest is disabled, never deleted (assignments refer to its id);
#   - a service principal with "assignment required": only users, groups and applications given a
#     routelock role can get a token for the API at all.
# Optional: ENTRA_PREAUTHORIZE_AZURE_CLI=true pre-authorizes the Azure CLI for user_impersonation, so
# operators can run `az account get-access-token --scope api://<appId>/user_impersonation`.
#
# Needs the Azure CLI signed in as someone who may create app registrations (or owns this one).
# ROUTELOCK_HOOKS_READONLY=true (CI): only checks that ENTRA_CLIENT_ID is set; makes no Graph call.
set -euo pipefail
HOOK_NAME=entra-app
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

manifest="$here/../entra/app-roles.json"
graph="https://graph.microsoft.com/v1.0"
azure_cli_app_id="04b07795-8ddb-461a-bbee-02f9e1bf7b46"

client_id="$(azd_value ENTRA_CLIENT_ID)"
if [[ -n "$client_id" ]] && ! is_guid "$client_id"; then
  die "ENTRA_CLIENT_ID is not an application (client) id: '$client_id'"
fi

if hooks_readonly; then
  [[ -n "$client_id" ]] || die "ENTRA_CLIENT_ID is not set (ROUTELOCK_HOOKS_READONLY=true: this run creates nothing)"
  log "ENTRA_CLIENT_ID=$client_id (read-only run: the registration is not changed)"
  exit 0
fi

require az node
[[ -f "$manifest" ]] || die "missing $manifest"
env_name="$(azd_value AZURE_ENV_NAME)"
[[ -n "$env_name" ]] || die "AZURE_ENV_NAME is not set (run inside azd, or export it)"
display_name="${ENTRA_APP_DISPLAY_NAME:-routelock-api-${env_name}}"
[[ "$display_name" =~ ^[A-Za-z0-9._\ -]{1,120}$ ]] || die "unexpected display name '$display_name'"

if [[ -z "$client_id" ]]; then
  # An earlier run may have created it and lost its azd environment: match the exact display name.
  found="$(az ad app list --filter "displayName eq '${display_name}'" --query '[].appId' -o tsv)"
  count="$(printf '%s' "$found" | grep -c . || true)"
  if ((count > 1)); then
    die "$count app registrations are named '$display_name'; set ENTRA_CLIENT_ID to the right one (azd env set ENTRA_CLIENT_ID <appId>)"
  elif ((count == 1)); then
    client_id="$found"
    log "reusing app registration '$display_name' ($client_id)"
  else
    client_id="$(az ad app create --display-name "$display_name" --sign-in-audience AzureADMyOrg \
      --query appId -o tsv)"
    log "created app registration '$display_name' ($client_id)"
  fi
fi

object_id="$(retry 6 az ad app show --id "$client_id" --query id -o tsv)" ||
  die "cannot read app registration $client_id (does it exist, and may you manage it?)"

# The desired registration: current state merged with the manifest (node: JSON without jq).
current="$(az rest --method GET --uri "$graph/applications/$object_id?\$select=appId,identifierUris,appRoles,api")"
body_file="$(mktemp)"
trap 'rm -f "$body_file"' EXIT
CURRENT="$current" MANIFEST="$manifest" CLIENT_ID="$client_id" node - >"$body_file" <<'JS'
const fs = require('node:fs');
const manifest = JSON.parse(fs.readFileSync(process.env.MANIFEST, 'utf8'));
const app = JSON.parse(process.env.CURRENT);
const fail = (message) => {
  process.stderr.write(`entra-app: error: ${message}\n`);
  process.exit(1);
};
// Keep every existing entry (disabled when the manifest no longer has it); add or update the rest.
function reconcile(current, wanted, kind) {
  const ids = new Set(wanted.map((w) => w.id));
  for (const c of current) {
    const clash = wanted.find((w) => w.value === c.value && w.id !== c.id);
    if (clash && c.isEnabled) {
      fail(`${kind} "${c.value}" exists with id ${c.id}, the manifest has ${clash.id}; disable or remove the old one first`);
    }
  }
  const merged = current.map((c) => {
    const w = wanted.find((x) => x.id === c.id);
    return w ? { ...c, ...w, isEnabled: true } : { ...c, isEnabled: false };
  });
  for (const w of wanted) if (!current.some((c) => c.id === w.id)) merged.push({ ...w, isEnabled: true });
  return merged;
}
const uri = `api://${process.env.CLIENT_ID}`;
const api = app.api ?? {};
const body = {
  identifierUris: [...new Set([...(app.identifierUris ?? []), uri])],
  appRoles: reconcile(app.appRoles ?? [], manifest.appRoles, 'app role'),
  api: {
    ...api,
    requestedAccessTokenVersion: 2,
    oauth2PermissionScopes: reconcile(api.oauth2PermissionScopes ?? [], manifest.oauth2PermissionScopes ?? [], 'scope'),
  },
};
process.stdout.write(JSON.stringify(body));
JS
retry 3 az rest --method PATCH --uri "$graph/applications/$object_id" \
  --headers Content-Type=application/json --body "@$body_file" >/dev/null ||
  die "could not update app registration $client_id"
log "identifier URI api://$client_id, v2 access tokens, $(node -e 'const m=require(process.argv[1]);console.log(m.appRoles.length)' "$manifest") app roles"

if [[ "$(printf '%s' "${ENTRA_PREAUTHORIZE_AZURE_CLI:-false}" | tr '[:upper:]' '[:lower:]')" == "true" ]]; then
  scope_id="$(node -e 'const m=require(process.argv[1]);console.log(m.oauth2PermissionScopes[0].id)' "$manifest")"
  current="$(az rest --method GET --uri "$graph/applications/$object_id?\$select=api")"
  CURRENT="$current" CLI="$azure_cli_app_id" SCOPE="$scope_id" node - >"$body_file" <<'JS'
const api = JSON.parse(process.env.CURRENT).api ?? {};
const others = (api.preAuthorizedApplications ?? []).filter((p) => p.appId !== process.env.CLI);
const cli = { appId: process.env.CLI, delegatedPermissionIds: [process.env.SCOPE] };
process.stdout.write(JSON.stringify({ api: { ...api, preAuthorizedApplications: [...others, cli] } }));
JS
  az rest --method PATCH --uri "$graph/applications/$object_id" \
    --headers Content-Type=application/json --body "@$body_file" >/dev/null ||
    die "could not pre-authorize the Azure CLI"
  log "Azure CLI pre-authorized for api://$client_id/user_impersonation"
fi

# The enterprise application (service principal): roles are assigned on it; "assignment required"
# keeps tokens away from anyone without a routelock role.
if ! az ad sp show --id "$client_id" --query id -o tsv >/dev/null 2>&1; then
  retry 6 az ad sp create --id "$client_id" --query id -o tsv >/dev/null || die "could not create the service principal"
  log "created the service principal"
fi
retry 6 az ad sp update --id "$client_id" --set appRoleAssignmentRequired=true ||
  die "could not require role assignment on the service principal"

if [[ "$(azd env get-value ENTRA_CLIENT_ID 2>/dev/null || true)" != "$client_id" ]]; then
  azd env set ENTRA_CLIENT_ID "$client_id"
  log "azd env: ENTRA_CLIENT_ID=$client_id"
fi
