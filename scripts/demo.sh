#!/usr/bin/env bash
# The main job on the embedded default engine: a sample SQLite source, an offload with
# incremental update, changes captured and extracted, and the latest state shown.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
export PATH="$ROOT/.venv/bin:$PATH"

export OFFLOAD_HOME="$ROOT/demo_home"
rm -rf "$OFFLOAD_HOME"
mkdir -p "$OFFLOAD_HOME/conf"
cat > "$OFFLOAD_HOME/conf/offload.env" <<ENV
GLUON_SOURCE_URL=sqlite:///$OFFLOAD_HOME/sample.db
ENV

step() { printf '\n== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

python "$ROOT/scripts/sample_source.py" create "$OFFLOAD_HOME/sample.db"
step "Plan the offload (no -x: nothing changes)" \
  offload -t main.products --incremental-updates-enabled --incremental-extraction-method=CHANGELOG
step "Offload with incremental update enabled" \
  offload -t main.products -x --incremental-updates-enabled --incremental-extraction-method=CHANGELOG
step "The lake now" gluon query "SELECT * FROM main.products ORDER BY prod_id"
python "$ROOT/scripts/sample_source.py" change "$OFFLOAD_HOME/sample.db"
step "Extract the captured changes" offload -t main.products -x --incremental-run-extraction
step "Nothing left to extract (no engine started)" offload -t main.products -x --incremental-run-extraction
step "The latest state through the user view" gluon query "SELECT * FROM main.products ORDER BY prod_id"
python "$ROOT/scripts/sample_source.py" more "$OFFLOAD_HOME/sample.db"
step "Compaction, single-session style: stop at the acknowledgement step" \
  offload -t main.products -x --incremental-run-compaction --incremental-terminate-compaction --incremental-wait-time=0
step "An extraction acknowledges the new control partition (and ships the newest changes)" \
  offload -t main.products -x --incremental-run-extraction
step "The compaction resumes and finishes" \
  offload -t main.products -x --incremental-run-compaction
step "Changes per control partition after the compaction" \
  gluon query "SELECT gl_control_partition, COUNT(*) AS changes FROM main_load.products_changes GROUP BY gl_control_partition"
# The acknowledging extraction shipped the newest 4 changes to control partition 1, which the
# compaction (of partition 0) leaves to the next one: the view merges them over the new base.
step "The latest state: the compacted base table plus the 4 changes in control partition 1" \
  gluon query "SELECT * FROM main.products ORDER BY prod_id"
step "Incremental update status" display_incremental_status -t main.products
printf '\nDemo files (env file, logs, lake, repository) are in %s\n' "$OFFLOAD_HOME"
