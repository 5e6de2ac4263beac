#!/usr/bin/env bash
# Merge gate for a GPU runner: run one phase of the perfgate suite against the chosen engine, keep
# the JUnit XML and the decision record as artifacts, publish the Markdown summary, and exit
# non-zero exactly when the phase's tests failed (a failed gate fails its test).
#
# Usage: ci/gate.sh [PHASE] [extra pytest args...]
#   PHASE                      phase marker to run (default: $PERFGATE_PHASE or phase1)
# Environment:
#   PERFGATE_ENGINE            engines to measure, space-separated NAME or ROLE=NAME items, e.g.
#                              "baseline=qwen72b speculative=qwen72b-spec" (default: embedded CPU engine)
#   PERFGATE_TESTS             test path (default: perf_tests)
#   PERFGATE_THRESHOLDS        thresholds file (default: thresholds.toml in the repo root)
#   PERFGATE_OUT               results directory (default: perfgate-results)
#   PERFGATE_ARTIFACTS         where to copy junit.xml, gates.xml, decisions.json, summary.md, report.html
#                              (default: $PERFGATE_OUT/artifacts)
#   PYTHON                     interpreter with pytest-perfgate installed (default: .venv/bin/python or python3)
#   GITHUB_STEP_SUMMARY        if set, summary.md is appended to it
# Exit status: pytest's: 0 all gates passed, 1 a gate (or another test) failed,
#   2 interrupted, 3 internal error, 4 usage error (e.g. a bad thresholds.toml), 5 no tests selected.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
phase=${1:-${PERFGATE_PHASE:-phase1}}
[ $# -gt 0 ] && shift
tests=${PERFGATE_TESTS:-perf_tests}
out=${PERFGATE_OUT:-perfgate-results}
artifacts=${PERFGATE_ARTIFACTS:-$out/artifacts}
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$here/.venv/bin/python" ]; then PYTHON="$here/.venv/bin/python"; else PYTHON=python3; fi
fi

args=(-m pytest -m "$phase" "$tests" --perfgate-out "$out" --junitxml "$out/junit.xml"
      -o junit_family=xunit1 -p no:cacheprovider -rs)
[ -n "${PERFGATE_THRESHOLDS:-}" ] && args+=(--perfgate-thresholds "$PERFGATE_THRESHOLDS")
for e in ${PERFGATE_ENGINE:-}; do args+=(--perfgate-engine "$e"); done

echo "perfgate gate: $PYTHON ${args[*]} $*"
"$PYTHON" "${args[@]}" "$@"
rc=$?

mkdir -p "$artifacts"
for f in junit.xml gates.xml decisions.json summary.md report.html; do
  [ -f "$out/$f" ] && cp "$out/$f" "$artifacts/"
done
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  if [ -f "$out/summary.md" ]; then
    cat "$out/summary.md" >> "$GITHUB_STEP_SUMMARY"
  else
    printf '## perfgate %s\n\nNo gate was evaluated (pytest exit status %s).\n' "$phase" "$rc" >> "$GITHUB_STEP_SUMMARY"
  fi
fi
case $rc in
  0) echo "perfgate gate: $phase PASSED" ;;
  1) echo "perfgate gate: $phase FAILED (see $artifacts/summary.md)" ;;
  *) echo "perfgate gate: $phase could not be evaluated (pytest exit status $rc)" ;;
esac
exit $rc
