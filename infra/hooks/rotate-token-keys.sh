#!/usr/bin/env bash
# Rotate the fencing-token key set in Key Vault (not an azd hook: run it by hand).
#
#   rotate-token-keys.sh status            key ids and which one is current (never the keys)
#   rotate-token-keys.sh add               add a new key; `current` stays as it is
#   rotate-token-keys.sh promote <key id>  make that key current (new tokens are signed with it)
#   rotate-token-keys.sh retire <key id>   remove a key that is no longer current
#
# A rotation is add → (every instance has the new set) → promote → (every migration started under the
# old key has ended) → retire. Each step writes a new version of the secret; App Service picks up the
# latest version within 24 hours, or at once on a restart (`az functionapp restart`) or any app-setting
# change. Never promote a key some instance may not know yet: tokens signed with it would be refused
# there. See docs/design.md §9.4 (key rotation) for the whole procedure.
#
# Needs data-plane access to the vault (Key Vault Secrets Officer, granted just for the rotation) and
# the vault name: AZURE_KEY_VAULT_NAME (an azd output) or --vault <name>.
set -euo pipefail
HOOK_NAME=rotate-token-keys
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

secret_name="routelock-token-keys"
vault=""
args=()
while (($#)); do
  case "$1" in
    --vault) vault="${2:-}"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
command="${1:-}"
key_arg="${2:-}"
case "$command" in
  status | add) ;;
  promote | retire) [[ -n "$key_arg" ]] || die "usage: $0 $command <key id>" ;;
  *) die "usage: $0 [--vault <name>] status | add | promote <key id> | retire <key id>" ;;
esac

require az node
vault="${vault:-$(azd_value AZURE_KEY_VAULT_NAME)}"
[[ -n "$vault" ]] || die "no vault: pass --vault <name> or set AZURE_KEY_VAULT_NAME"

work="$(mktemp -d)"
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT

az keyvault secret show --vault-name "$vault" --name "$secret_name" --query value -o tsv >"$work/current.json" ||
  die "cannot read $secret_name from $vault (Key Vault Secrets Officer on the vault?)"

# Edits the set in node; prints a one-line summary on stderr, the new set (if any) to $work/next.json.
COMMAND="$command" KEY_ID="$key_arg" WORK="$work" node - <<'JS'
const fs = require('node:fs');
const crypto = require('node:crypto');
const path = (name) => `${process.env.WORK}/${name}`;
const fail = (m) => { process.stderr.write(`rotate-token-keys: error: ${m}\n`); process.exit(1); };
let set;
try { set = JSON.parse(fs.readFileSync(path('current.json'), 'utf8').trim()); } catch { fail('the secret is not JSON'); }
if (!set || typeof set.current !== 'string' || !set.keys || !(set.current in set.keys)) fail('the secret is not a key set');
const ids = Object.keys(set.keys);
const show = (s) => Object.keys(s.keys).map((id) => (id === s.current ? `${id} (current)` : id)).join(', ');
const id = process.env.KEY_ID;
switch (process.env.COMMAND) {
  case 'status':
    process.stderr.write(`keys: ${show(set)}\n`);
    process.exit(0);
  case 'add': {
    const base = `k${new Date().toISOString().slice(0, 10).replace(/-/g, '')}`;
    let next = base;
    for (let n = 2; next in set.keys; n += 1) next = `${base}-${n}`;
    set = { current: set.current, keys: { ...set.keys, [next]: crypto.randomBytes(32).toString('base64url') } };
    process.stderr.write(`added ${next}; current is still ${set.current}. Promote it once every instance has the new set.\n`);
    break;
  }
  case 'promote':
    if (!ids.includes(id)) fail(`no key "${id}" (have: ${ids.join(', ')})`);
    if (set.current === id) fail(`"${id}" is already current`);
    set = { ...set, current: id };
    process.stderr.write(`current is now ${id}. Retire the old key only after every migration started before now has ended.\n`);
    break;
  case 'retire': {
    if (!ids.includes(id)) fail(`no key "${id}" (have: ${ids.join(', ')})`);
    if (set.current === id) fail(`"${id}" is current; promote another key first`);
    const { [id]: _gone, ...rest } = set.keys;
    set = { ...set, keys: rest };
    process.stderr.write(`retired ${id}; tokens signed with it are no longer accepted.\n`);
    break;
  }
}
fs.writeFileSync(path('next.json'), JSON.stringify(set), { mode: 0o600 });
process.stderr.write(`keys: ${show(set)}\n`);
JS

if [[ -f "$work/next.json" ]]; then
  az keyvault secret set --vault-name "$vault" --name "$secret_name" --file "$work/next.json" \
    --content-type application/json --query id -o tsv >/dev/null ||
    die "could not write the new version of $secret_name"
  log "wrote a new version of $secret_name; restart the function app (or wait up to 24 h) for every instance to load it"
fi
