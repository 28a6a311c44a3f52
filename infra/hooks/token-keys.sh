#!/usr/bin/env bash
# azd preprovision hook: the fencing-token key set, generated once.
#
# The app derives fencing tokens as HMAC under a versioned key set, ROUTELOCK_TOKEN_KEYS =
# {"current":"<id>","keys":{"<id>":"<base64url of 32 random bytes>"}}, which in Azure is a Key Vault
# reference to the secret routelock-token-keys. This hook makes sure that secret will exist:
#   - a key set already staged in the azd environment (ROUTELOCK_TOKEN_KEYS_B64): keep it, this
#     provision writes it;
#   - the vault already holds the secret: do nothing; the deployment leaves the secret and its versions
#     alone (rotation is done in the vault, see infra/hooks/rotate-token-keys.sh);
#   - neither (the first provision): generate one key (openssl rand, 32 bytes, base64url) and stage it
#     as ROUTELOCK_TOKEN_KEYS_B64. The postprovision hook removes it from the azd environment once the
#     secret is in the vault, so the key does not stay on this disk.
# Staged as base64 of the JSON because azd substitutes values into main.parameters.json as raw text,
# where the JSON's quotes would break the file.
#
# The check uses the control plane only (the secret's metadata, never its value): Reader on the
# resource group is enough. If it cannot tell, it stops rather than risk replacing a live key set.
# ROUTELOCK_HOOKS_READONLY=true (CI): never generates; fails if the vault has no key set.
set -euo pipefail
HOOK_NAME=token-keys
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

secret_name="routelock-token-keys"
kv_api="2023-07-01"

# Checks a staged value: base64 of {"current", "keys": {id: base64url >= 32 bytes}}. Prints nothing.
check_key_set() {
  B64="$1" node - <<'JS'
const set = JSON.parse(Buffer.from(process.env.B64, 'base64').toString('utf8'));
const ok =
  set && typeof set.current === 'string' && set.keys && typeof set.keys === 'object' &&
  set.current in set.keys &&
  Object.entries(set.keys).every(
    ([id, key]) => /^[A-Za-z0-9_-]{1,32}$/.test(id) && typeof key === 'string' &&
      /^[A-Za-z0-9_-]+$/.test(key) && Buffer.from(key, 'base64url').length >= 32,
  );
if (!ok) process.exit(1);
JS
}

staged="$(azd_value ROUTELOCK_TOKEN_KEYS_B64)"
if [[ -n "$staged" ]]; then
  require node
  check_key_set "$staged" 2>/dev/null || die "ROUTELOCK_TOKEN_KEYS_B64 is not a valid key set (base64 of {\"current\":…,\"keys\":{…}})"
  log "a key set is staged (ROUTELOCK_TOKEN_KEYS_B64): this provision writes it to Key Vault"
  exit 0
fi

require az
env_name="$(azd_value AZURE_ENV_NAME)"
[[ -n "$env_name" ]] || die "AZURE_ENV_NAME is not set (run inside azd, or export it)"
resource_group="$(azd_value AZURE_RESOURCE_GROUP)"
resource_group="${resource_group:-rg-${env_name}}"
vault="$(azd_value AZURE_KEY_VAULT_NAME)"
# The az CLI's own default subscription may not be azd's.
subscription="$(azd_value AZURE_SUBSCRIPTION_ID)"
sub=()
[[ -z "$subscription" ]] || sub=(--subscription "$subscription")

# 0: the vault holds the secret; 1: there is no resource group, no vault, or no such secret yet.
# Anything it cannot read stops the hook: generating a new key set over a live one would fence out
# every migration in flight.
secret_exists() {
  local exists vault_id names
  exists="$(az group exists --name "$resource_group" ${sub[@]+"${sub[@]}"})" || die "cannot check resource group $resource_group"
  [[ "$exists" == "true" ]] || return 1
  if [[ -z "$vault" ]]; then
    vault="$(az keyvault list --resource-group "$resource_group" ${sub[@]+"${sub[@]}"} \
      --query "[?tags.\"azd-env-name\"=='${env_name}'].name | [0]" -o tsv)" ||
      die "cannot list the key vaults in $resource_group"
    [[ -n "$vault" ]] || return 1
  fi
  vault_id="$(az keyvault show --name "$vault" --resource-group "$resource_group" ${sub[@]+"${sub[@]}"} --query id -o tsv)" ||
    die "cannot read Key Vault $vault in $resource_group (if it was deleted, unset AZURE_KEY_VAULT_NAME: azd env set AZURE_KEY_VAULT_NAME '')"
  names="$(az rest --method GET --uri "https://management.azure.com${vault_id}/secrets?api-version=${kv_api}" \
    --query 'value[].name' -o tsv)" || die "cannot list the secrets of $vault (needs Reader on it)"
  grep -qx "$secret_name" <<<"$names"
}

if secret_exists; then
  log "Key Vault $vault already holds $secret_name; leaving it and its versions alone"
  exit 0
fi

if hooks_readonly; then
  die "no $secret_name in Key Vault and ROUTELOCK_HOOKS_READONLY=true: run the first provision by hand (azd provision), which creates it"
fi

require openssl node azd
key="$(openssl rand 32 | base64 | tr -d '\n=' | tr '+/' '-_')"
key_id="k$(date -u +%Y%m%d)"
json="$(printf '{"current":"%s","keys":{"%s":"%s"}}' "$key_id" "$key_id" "$key")"
b64="$(printf '%s' "$json" | base64 | tr -d '\n')"
check_key_set "$b64" || die "generated an invalid key set (openssl?)"
azd env set ROUTELOCK_TOKEN_KEYS_B64 "$b64"
log "generated key $key_id; staged as ROUTELOCK_TOKEN_KEYS_B64 until this provision has written it to Key Vault"
