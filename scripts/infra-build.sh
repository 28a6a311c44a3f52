#!/usr/bin/env bash
# `npm run infra:build` (and a set-up step of `npm test`): compile every Bicep entry point to ARM JSON under
# infra/arm/ and lint every Bicep file with infra/bicep/bicepconfig.json (every analyzer rule an error).
# Fails on any error or warning. The compiler: $BICEP, else a `bicep` on PATH, else the Bicep CLI restored
# from NuGet (Azure.Bicep.CommandLine.linux-x64, pinned in infra/tools/bicep-cli.csproj) into .tools/nuget.
set -euo pipefail
cd "$(dirname "$0")/.."

# --if-stale (the contributor loop, `npm run test:fast`): nothing to do when every compiled template is newer
# than every Bicep file, so the loop pays for the compiler only after a template changed.
if [ "${1:-}" = "--if-stale" ] && [ -f infra/arm/main.json ] &&
  [ -z "$(find infra/bicep -name '*.bicep' -newer infra/arm/main.json -print -quit)" ]; then
  exit 0
fi
version=0.49.2
restored=".tools/nuget/azure.bicep.commandline.linux-x64/$version/tools/bicep"

find_bicep() {
  if [ -n "${BICEP:-}" ]; then
    [ -x "$BICEP" ] || { echo "infra:build: BICEP=$BICEP is not an executable file" >&2; exit 1; }
    echo "$BICEP"
  elif command -v bicep >/dev/null 2>&1; then
    command -v bicep
  elif [ -f "$restored" ]; then
    echo "$restored"
  elif command -v dotnet >/dev/null 2>&1; then
    echo "infra:build: restoring the Bicep CLI $version from NuGet" >&2
    DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 \
      dotnet restore infra/tools/bicep-cli.csproj --packages .tools/nuget --verbosity quiet >&2
    echo "$restored"
  else
    cat >&2 <<'MSG'
infra:build: no Bicep compiler. Install one of:
  - the Bicep CLI on PATH (https://aka.ms/bicep/install, or `az bicep install` and add ~/.azure/bin to PATH),
  - the .NET SDK, so this script can restore Azure.Bicep.CommandLine.linux-x64 from NuGet;
or set BICEP to a bicep executable.
MSG
    exit 1
  fi
}

bicep="$(find_bicep)"
chmod +x "$bicep" 2>/dev/null || true # NuGet does not keep the executable bit
mkdir -p infra/arm
output="$(mktemp)"
trap 'rm -f "$output"' EXIT
status=0
# Entry points are the templates outside modules/ (azd deploys main.bicep).
for entry in infra/bicep/*.bicep; do
  "$bicep" build "$entry" --outdir infra/arm >>"$output" 2>&1 || status=1
done
"$bicep" lint --pattern 'infra/bicep/**/*.bicep' >>"$output" 2>&1 || status=1
cat "$output"
if [ "$status" -ne 0 ] || grep -Eq ': (Error|Warning) ' "$output"; then
  echo "infra:build: the Bicep compiler or linter reported the findings above (errors and warnings both fail)" >&2
  exit 1
fi
echo "infra:build: $("$bicep" --version | head -n1): compiled $(ls infra/bicep/*.bicep | wc -l) entry point(s), linted $(find infra/bicep -name '*.bicep' | wc -l) files: 0 errors, 0 warnings"
