# Shared by the wrappers in this directory (sourced, not run): load the env file, find the
# console script, exec it. See docs/operations.md.
#
# - OFFLOAD_HOME: taken from the environment; when unset and the wrapper was started as
#   <dir>/bin/<name> with <dir>/conf/offload.env present, <dir> is used.
# - $OFFLOAD_HOME/conf/offload.env is sourced when present (gluon refuses, naming file and
#   line, any line bash would read differently from gluon: docs/operations.md, section 3).
#   Variables already set in the environment keep their values (as gluon itself does), so
#   a cron line can override one.
# - The console script comes from $GLUON_VENV/bin, else the .venv next to this checkout,
#   else the first one on PATH that is not one of these wrappers.

gluon_exec() {
    local name="$1"
    shift
    local invoked self_dir root candidate saved
    invoked="$(cd -- "$(dirname -- "${BASH_SOURCE[1]}")" && pwd)"
    self_dir="$(dirname -- "$(readlink -f -- "${BASH_SOURCE[1]}")")"
    root="$(cd -- "$self_dir/.." && pwd)"

    # ${invoked%/*}, not $invoked/..: bin may be a symlink into this checkout.
    if [[ -z "${OFFLOAD_HOME:-}" && -f "${invoked%/*}/conf/offload.env" ]]; then
        OFFLOAD_HOME="${invoked%/*}"
    fi
    if [[ -n "${OFFLOAD_HOME:-}" ]]; then
        export OFFLOAD_HOME
        if [[ -f "$OFFLOAD_HOME/conf/offload.env" ]]; then
            saved="$(export -p)"
            set -a
            # shellcheck disable=SC1091
            . "$OFFLOAD_HOME/conf/offload.env"
            set +a
            eval "$saved"
        fi
    fi

    for candidate in "${GLUON_VENV:+$GLUON_VENV/bin/$name}" "$root/.venv/bin/$name"; do
        if [[ -n "$candidate" && -x "$candidate" ]]; then
            exec "$candidate" "$@"
        fi
    done
    while IFS= read -r candidate; do
        if [[ "$(dirname -- "$(readlink -f -- "$candidate")")" != "$self_dir" ]]; then
            exec "$candidate" "$@"
        fi
    done < <(type -P -a "$name" 2>/dev/null)
    printf '%s: error: cannot find the %s console script: run scripts/setup.sh in %s, or set GLUON_VENV to the virtualenv gluon is installed in\n' \
        "$name" "$name" "$root" >&2
    exit 1
}
