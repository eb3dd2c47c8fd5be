#!/usr/bin/env bash
# Run gluon's checks: setup (scripts/setup.sh --test), ruff lint, ruff format check, mypy, import contracts, pytest,
# then print the share of gluon's statements the tests ran (coverage).
#
# Usage: bash scripts/test.sh [pytest args...]
# Extra arguments go to pytest only. Stops at the first failing step and says
# which one failed. pytest's exit code 5 (no tests collected) is a failure.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

cd "$ROOT"
BIN="$ROOT/.venv/bin"
# Tests may spawn the project's console scripts; resolve them from the venv.
export VIRTUAL_ENV="$ROOT/.venv"
export PATH="$BIN:$PATH"

step() {
    local name=$1
    shift
    printf 'test: == %s\n' "$name"
    local rc=0
    "$@" || rc=$?
    if ((rc == 5)) && [[ $name == pytest ]]; then
        printf 'test: FAILED: pytest collected no tests (exit 5)\n' >&2
        exit "$rc"
    fi
    if ((rc != 0)); then
        printf 'test: FAILED: %s (exit %d)\n' "$name" "$rc" >&2
        exit "$rc"
    fi
}

# One line: the statements of gluon the test process ran. Commands the tests spawn as
# child processes (bin/ wrappers, the offload process) are not measured.
coverage_total() {
    local total
    total=$("$BIN/coverage" report --format=total) || return
    printf 'test: coverage of gluon: %s%% of statements\n' "$total"
}

# --test: the dev extra, PostgreSQL and Chromium on top of what the demo needs.
step setup bash "$ROOT/scripts/setup.sh" --test
step "ruff check" "$BIN/ruff" check .
step "ruff format" "$BIN/ruff" format --check .
step "mypy" "$BIN/mypy"
# The import boundaries declared in pyproject.toml ([tool.importlinter]).
step "import contracts" "$BIN/lint-imports" --no-logo
# --cov-report= : no per-file table; coverage_total prints one line after pytest.
step pytest "$BIN/pytest" -q --cov=gluon --cov-report= "$@"
step coverage coverage_total

printf 'test: all checks passed\n'
