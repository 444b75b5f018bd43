#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The man page and the bash completion (written by gpuaff-docgen from the
# option tables) against the tool's own parser: every flag each command's
# --help lists is in that command's section of the man page and in its
# completion words, and the completion offers the policy names after --policy.
# Usage: man_completion_test.sh GPUAFF MAN_PAGE COMPLETION
set -euo pipefail
gpuaff=$1 man=$2 completion=$3
fail=0
for command in bind topo exec record doctor probe; do
  # The man page's section for the command: from its .SS line to the next .SS/.SH.
  section=$(awk -v want=".SS \"gpuaff $command\"" '$0 == want {on = 1; next} /^\.S[SH] / {on = 0} on' "$man")
  [[ -n $section ]] || { echo "FAIL: the man page has no section for $command"; fail=1; continue; }
  words=$(sed -n "s/^    $command) COMPREPLY=(\$(compgen -W '\\([^']*\\)'.*/\\1/p" "$completion")
  [[ -n $words ]] || { echo "FAIL: the completion has no words for $command"; fail=1; continue; }
  help=$("$gpuaff" "$command" --help)
  flags=$(grep -oE '^  (-h,)?--[a-z][a-z-]*' <<<"$help" | sed 's/^  //; s/^-h,//' | sort -u)
  [[ $(wc -l <<<"$flags") -ge 3 ]] || { echo "FAIL: $command --help lists too few flags: $flags"; fail=1; }
  for flag in $flags; do
    [[ $flag == --help ]] && continue
    escaped=${flag//-/\\-}
    grep -qE "^\.BI? ${escaped//\\/\\\\}( |$)" <<<"$section" || { echo "FAIL: man page, $command: no $flag"; fail=1; }
    grep -qw -- "$flag" <<<"$words" || { echo "FAIL: completion, $command: no $flag"; fail=1; }
    # The value the flag takes, as --help shows it ("  --gpu N[,N...]|all  the GPU..."),
    # is the one the man page shows (.BI \-\-gpu " N[,N...]|all").
    value=$(sed -n "s/^  ${flag} \([^ ]*\).*/\1/p" <<<"$help" | head -1)
    if [[ -n $value ]]; then
      shown=$(sed -n "s/^\.BI ${escaped//\\/\\\\} \" \(.*\)\"$/\1/p" <<<"$section" | sed 's/\\-/-/g' | head -1)
      [[ $shown == "$value" ]] || { echo "FAIL: man page, $command $flag: value '$shown', --help says '$value'"; fail=1; }
    fi
  done
done
# Values: the policy names after --policy, bind's formats after --format.
got=$(bash -c 'source "$1"
  COMP_WORDS=(gpuaff bind --policy ""); COMP_CWORD=3; _gpuaff; echo "${COMPREPLY[*]}"
  COMP_WORDS=(gpuaff bind --format ""); COMP_CWORD=3; _gpuaff; echo "${COMPREPLY[*]}"
  COMP_WORDS=(gpuaff ""); COMP_CWORD=1; _gpuaff; echo "${COMPREPLY[*]}"' _ "$completion")
expected="node socket exclusive core-complex all single single-unique unique-interleaved unique-contiguous
cpulist mask numactl json env
bind topo exec record doctor probe --help --version"
[[ $got == "$expected" ]] || { echo "FAIL: completion values:"; echo "$got"; fail=1; }
# File names: one word each, whatever they hold, and quoted when inserted
# (compopt -o filenames: readline then escapes a blank or a ';'). compopt
# works only while bash completes, so the test records the call instead.
files=$(mktemp -d)
trap 'rm -rf "$files"' EXIT
touch "$files/my node.tar" "$files/a;b"
got=$(bash -c 'source "$1"
  compopt() { echo "compopt $*"; }
  for words in "gpuaff topo --root $2/" "gpuaff exec --gpu 0 -- ./train $2/"; do
    read -ra COMP_WORDS <<<"$words"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _gpuaff
    printf "%s\n" "${#COMPREPLY[@]}" "${COMPREPLY[@]}"
  done' _ "$completion" "$files")
expected="compopt -o filenames
2
$files/a;b
$files/my node.tar
compopt -o filenames
2
$files/a;b
$files/my node.tar"
[[ $(LC_ALL=C sort <<<"$got") == $(LC_ALL=C sort <<<"$expected") ]] ||
  { echo "FAIL: file names completed as:"; echo "$got"; fail=1; }
# The man page's local-rank variables are the ones --local-rank reads, in the
# order it reads them: found by running it, each variable set to a different
# rank, dropping the one that won each time.
listed=$(awk '/^\.SH ENVIRONMENT/ {on = 1} on && /^\.TP/ {getline; if ($0 ~ /LOCAL_RANK/) {print; exit}}' "$man" |
  sed 's/^\.B //; s/\\f[BR]//g; s/\\-/-/g; s/, / /g')
json=$(dirname "$0")/../../fixtures/dgx-h100.json
mapfile -t named < <(env -i PATH="$PATH" "$gpuaff" exec --topology "$json" --local-rank --dry-run -- true 2>&1 |
  sed -n 's/.*none of \(.*\) is set.*/\1/p' | tr -d ',' | tr ' ' '\n')
((${#named[@]} >= 4)) || { echo "FAIL: exec --local-rank without a launcher names no variables"; fail=1; }
remaining=("${named[@]}") order=""
while ((${#remaining[@]} > 0)); do
  vars=() rank=0
  for v in "${remaining[@]}"; do vars+=("$v=$rank"); rank=$((rank + 1)); done
  gpu=$(env -i PATH="$PATH" "${vars[@]}" "$gpuaff" exec --topology "$json" --local-rank --dry-run -- true |
    sed -n 's/^  "gpu": \([0-9]*\),$/\1/p')
  [[ -n $gpu && $gpu -lt ${#remaining[@]} ]] || { echo "FAIL: exec --local-rank with ${vars[*]} gave GPU '$gpu'"; fail=1; break; }
  order+="${order:+ }${remaining[gpu]}"
  unset 'remaining[gpu]'
  remaining=("${remaining[@]}")
done
[[ $listed == "$order" ]] ||
  { echo "FAIL: the man page lists the local-rank variables '$listed'; --local-rank reads '$order'"; fail=1; }
((fail == 0)) && echo "man page and completion list every flag of every command"
exit $fail
