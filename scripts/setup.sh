#!/usr/bin/env bash
# Prepare this machine to develop and test gluon.
#
# - Installs PostgreSQL server binaries (plus contrib, for pgbench) from Debian
#   apt when no /usr/lib/postgresql/<ver>/bin/initdb exists. The test suite runs
#   its own throwaway clusters (tests/support/postgres.py); no service is used.
# - Creates .venv in the repo root and installs the project editable with the
#   `dev` extra. The install is skipped while .venv/.gluon-installed is newer
#   than pyproject.toml.
# - Installs Chromium (Debian package `chromium`) when /usr/bin/chromium is missing:
#   the report tests open the HTML report in headless Chromium.
#
# Idempotent and safe to rerun from any directory; the fast path (everything
# already in place) runs no apt or pip at all.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
STAMP="$VENV/.gluon-installed"

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

have_pg() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }
venv_ok() { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c '' 2>/dev/null; }
python_venv_ok() {
    command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip, venv' 2>/dev/null
}

as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# --- System packages --------------------------------------------------------
apt_pkgs=()
if ! have_pg; then
    apt_pkgs+=(postgresql postgresql-contrib)
fi
if [[ ! -x /usr/bin/chromium ]]; then
    apt_pkgs+=(chromium)
fi
# Debian's python3 ships without ensurepip; `python3 -m venv` needs python3-venv.
if ! venv_ok && ! python_venv_ok; then
    apt_pkgs+=(python3 python3-venv)
fi

if ((${#apt_pkgs[@]})); then
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install manually: ${apt_pkgs[*]}"
    log "installing ${apt_pkgs[*]} with apt-get"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt_pkgs[@]}"
    have_pg || die "PostgreSQL installed but no /usr/lib/postgresql/*/bin/initdb found"
    [[ -x /usr/bin/chromium ]] || die "chromium installed but /usr/bin/chromium is missing"
else
    log "PostgreSQL binaries present: $(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n1)"
fi

# initdb/pg_ctl refuse to run as root; the test helper then switches to the
# `postgres` user, which Debian's postgresql-common package creates.
if [[ $EUID -eq 0 ]] && ! id -u postgres >/dev/null 2>&1; then
    log "creating system user postgres"
    useradd --system --user-group --home-dir /var/lib/postgresql --no-create-home \
        --shell /bin/bash postgres
fi

# --- Python virtualenv ------------------------------------------------------
if ! venv_ok; then
    python_venv_ok || die "python3 with the venv module is required (apt-get install python3-venv)"
    log "creating virtualenv $VENV"
    # --clear: replaces a broken venv (e.g. one whose interpreter has gone).
    python3 -m venv --clear "$VENV"
    rm -f "$STAMP"
fi

if [[ -f "$STAMP" && "$STAMP" -nt "$ROOT/pyproject.toml" ]]; then
    log "virtualenv up to date ($VENV)"
else
    log "installing gluon (editable, [dev]) into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -e '.[dev]'
    touch "$STAMP"
fi

log "done"
