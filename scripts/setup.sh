#!/usr/bin/env bash
# Prepare this machine to run gluon (default) or to develop and test it (--test).
#
# Usage: bash scripts/setup.sh [--test]
#
# Always (what `bash scripts/demo.sh` needs):
# - Python's venv module: Debian's python3 ships without it; apt installs python3-venv
#   when `python3 -m venv` cannot work.
# - .venv in the repo root with the project installed editable and its runtime
#   dependencies only: the Spark Connect client (pyspark-client, no JVM jars), the embedded
#   Sail engine, deltalake, pyarrow, SQLAlchemy and the database drivers; gluon's modules
#   compiled to bytecode.
# With --test (what `bash scripts/test.sh` needs, on top):
# - the `dev` extra (pytest, ruff, mypy, sqlfluff, hypothesis, import-linter, coverage);
# - PostgreSQL server binaries (plus contrib, for pgbench) from Debian apt when no
#   /usr/lib/postgresql/<ver>/bin/initdb exists: the test suite runs its own throwaway
#   clusters (tests/support/postgres.py); no service is used;
# - Chromium (Debian package `chromium`) when /usr/bin/chromium is missing: the report
#   tests open the HTML report in headless Chromium.
#
# apt waits (up to GLUON_APT_WAIT seconds, default 600) for another package manager that
# holds its locks instead of failing. Each pip install is skipped while its stamp in .venv
# is newer than pyproject.toml. Idempotent and safe to rerun from any directory; the fast
# path (everything already in place) runs no apt or pip at all.
set -euo pipefail

TEST=0
case "${1:-}" in
    "") ;;
    --test) TEST=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        printf 'setup: ERROR: unknown option %s (usage: setup.sh [--test])\n' "$1" >&2
        exit 2
        ;;
esac

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
# One stamp per install: the runtime one, and the test one (runtime + dev extra).
STAMP="$VENV/.gluon-installed"
TEST_STAMP="$VENV/.gluon-installed-test"
APT_WAIT="${GLUON_APT_WAIT:-600}"
APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock)

log() { printf 'setup: %s\n' "$*"; }
die() {
    printf 'setup: ERROR: %s\n' "$*" >&2
    exit 1
}

have_pg() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }
venv_ok() { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c '' 2>/dev/null; }
python_venv_ok() {
    command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip, venv' 2>/dev/null
}
fresh() { [[ -f "$1" && "$1" -nt "$ROOT/pyproject.toml" ]]; }

as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# Wait until no other package manager (apt, unattended-upgrades, dpkg) holds apt's locks:
# -o DPkg::Lock::Timeout covers dpkg's lock during the install itself, not the lists lock
# that `apt-get update` takes (scripts/wait_for_apt.py).
wait_for_apt() {
    command -v python3 >/dev/null 2>&1 || return 0
    as_root python3 "$ROOT/scripts/wait_for_apt.py" "$APT_WAIT" "${APT_LOCKS[@]}"
}

apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install manually: $*"
    log "installing $* with apt-get"
    wait_for_apt
    as_root apt-get -o DPkg::Lock::Timeout="$APT_WAIT" update -q
    wait_for_apt
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout="$APT_WAIT" install -y -q "$@"
}

# --- System packages --------------------------------------------------------
apt_pkgs=()
# Debian's python3 ships without ensurepip; `python3 -m venv` needs python3-venv.
if ! venv_ok && ! python_venv_ok; then
    apt_pkgs+=(python3 python3-venv)
fi
if ((TEST)); then
    if ! have_pg; then
        apt_pkgs+=(postgresql postgresql-contrib)
    fi
    if [[ ! -x /usr/bin/chromium ]]; then
        apt_pkgs+=(chromium)
    fi
fi

if ((${#apt_pkgs[@]})); then
    apt_install "${apt_pkgs[@]}"
fi
if ((TEST)); then
    have_pg || die "PostgreSQL installed but no /usr/lib/postgresql/*/bin/initdb found"
    [[ -x /usr/bin/chromium ]] || die "chromium installed but /usr/bin/chromium is missing"
    log "PostgreSQL binaries present: $(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n1)"
    # initdb/pg_ctl refuse to run as root; the test helper then switches to the
    # `postgres` user, which Debian's postgresql-common package creates.
    if [[ $EUID -eq 0 ]] && ! id -u postgres >/dev/null 2>&1; then
        log "creating system user postgres"
        useradd --system --user-group --home-dir /var/lib/postgresql --no-create-home \
            --shell /bin/bash postgres
    fi
fi

# --- Python virtualenv ------------------------------------------------------
if ! venv_ok; then
    python_venv_ok || die "python3 with the venv module is required (apt-get install python3-venv)"
    log "creating virtualenv $VENV"
    # --clear: replaces a broken venv (e.g. one whose interpreter has gone).
    python3 -m venv --clear "$VENV"
    rm -f "$STAMP" "$TEST_STAMP"
fi

if ((TEST)); then
    target=$TEST_STAMP spec='.[dev]' what='editable, with the dev extra'
else
    target=$STAMP spec='.' what='editable, runtime dependencies'
fi
if fresh "$target" || { ((!TEST)) && fresh "$TEST_STAMP"; }; then
    log "virtualenv up to date ($VENV)"
else
    # pyspark-client and the full pyspark install the same `pyspark` package: a venv made
    # before the switch holds the full one, whose files pyspark-client would half overwrite.
    # Keep it only with the classic extra (delta-spark), which needs it.
    pip=("$VENV/bin/pip" -q --disable-pip-version-check)
    if "${pip[@]}" show pyspark >/dev/null 2>&1 && ! "${pip[@]}" show delta-spark >/dev/null 2>&1; then
        log "replacing the full pyspark with the Spark Connect client (pyspark-client)"
        "${pip[@]}" uninstall -y pyspark
        # A pyspark-client installed beside it lost the files they share: install it afresh.
        if "${pip[@]}" show pyspark-client >/dev/null 2>&1; then
            "${pip[@]}" uninstall -y pyspark-client
        fi
    fi
    log "installing gluon ($what) into $VENV"
    "${pip[@]}" install -e "$spec"
    touch "$target"
fi

# An editable install compiles none of gluon's own modules: each command would compile them
# on the fly, and where PYTHONDONTWRITEBYTECODE is set (as in many containers) at every
# start, about 0.15 s of CPU (issue 14). compileall only rewrites the stale ones (quick
# when nothing changed; after a `git pull`, the modules that did).
"$VENV/bin/python" -m compileall -q "$ROOT/gluon" >/dev/null

log "done"
