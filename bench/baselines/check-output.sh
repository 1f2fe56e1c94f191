#!/usr/bin/env bash
# Baseline: `check-output` in bash + jq with seed 001's researcher rule — at least 500
# characters and at least one citation — on {"agent", "output"} from stdin, in one jq call.
set -euo pipefail
exec jq -c '
  (.output // "" | tostring) as $out
  | [{check: "min_chars", ok: (($out | length) >= 500), detail: "\($out | length) characters"},
     {check: "require_all", ok: ($out | test("\\[\\d+\\]|https?://|doi:")), detail: "citation"}]
  | {ok: all(.ok), checks: .}'
