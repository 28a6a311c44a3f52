# Shared helpers for the azd hooks (sourced, not run). Bash.

log() { printf '%s: %s\n' "${HOOK_NAME:-hook}" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# A value of the azd environment. azd passes the environment's values to hooks as variables; outside
# a hook (or for a value set earlier in the same hook run) ask azd itself. Empty when unset.
azd_value() {
  local name="$1" value="${!1:-}"
  if [[ -z "$value" ]] && command -v azd >/dev/null 2>&1; then
    value="$(azd env get-value "$name" 2>/dev/null)" || value=""
  fi
  printf '%s' "$value"
}

# true when the hooks may only check, never create (CI: ROUTELOCK_HOOKS_READONLY=true).
hooks_readonly() {
  [[ "$(printf '%s' "${ROUTELOCK_HOOKS_READONLY:-false}" | tr '[:upper:]' '[:lower:]')" == "true" ]]
}

is_guid() {
  [[ "$1" =~ ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$ ]]
}

require() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required on PATH"
  done
}

# Run a command up to $1 times, 10 s apart (Entra replication: a new object is not visible everywhere
# at once).
retry() {
  local attempts="$1" n=1
  shift
  until "$@"; do
    if ((n >= attempts)); then return 1; fi
    log "retrying in 10 s ($n/$attempts): $1 $2"
    sleep 10
    n=$((n + 1))
  done
}
