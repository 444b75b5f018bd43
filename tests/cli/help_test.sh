#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Help a person can read, and a report that fits a screen:
# - every line of `gpuaff --help` and of each command's --help fits 80
#   columns when stdout is not a terminal, and COLUMNS when it is set;
# - gpuaff's help offers no option that gpuaff answers with "use gpuaff-hwloc"
#   (gpuaff-hwloc's help does offer them);
# - each command's help lists only exit codes it can end with: a code whose
#   meaning `gpuaff --help` gives as "doctor: ..." or "exec: ..." belongs to
#   that command alone (and exec's are what a missing command gives);
# - no parser leftovers ("Excludes:", "--flag VALUE=default");
# - `gpuaff topo` on every fixture fits 120 columns.
# Usage: help_test.sh GPUAFF GPUAFF_HWLOC|"" FIXTURES_DIR
set -uo pipefail
gpuaff=$1 hwloc=$2 fixtures=$3
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export LC_ALL=C.UTF-8
unset COLUMNS NO_COLOR
commands=(bind topo exec record doctor)

# The widest line of stdin, in columns (wc -L counts characters, not bytes).
widest() { wc -L | tr -d ' '; }

for words in "" "${commands[@]}"; do
  # shellcheck disable=SC2086  # $words is empty or one command
  text=$("$gpuaff" $words --help | cat) || bad "gpuaff $words --help failed"
  w=$(widest <<<"$text")
  ((w <= 80)) || bad "gpuaff $words --help is $w columns wide, not a terminal (at most 80): $(awk 'length > 80' <<<"$text" | head -2)"
  # shellcheck disable=SC2086
  w=$(COLUMNS=60 "$gpuaff" $words --help | widest)
  ((w <= 60)) || bad "gpuaff $words --help with COLUMNS=60 is $w columns wide"
  grep -n 'Excludes:' <<<"$text" && bad "gpuaff $words --help shows parser leftovers (above)"
  # A default belongs in "(default: X)", not glued to the option as "--flag VALUE=X".
  while read -r d; do
    grep -nE -- "^  --.*=${d//|/\\|}( |$)" <<<"$text" && bad "gpuaff $words --help: '=$d' on an option (above)"
  done < <(grep -o '(default: [^)]*)' <<<"$text" | sed 's/(default: //; s/)$//; s/[.*^$[]/\\&/g' | sort -u)
  grep -n 'gpuaff-hwloc' <<<"$text" && bad "gpuaff $words --help offers what only gpuaff-hwloc does (above)"
done
# Wider when asked: the width is the terminal's, not a fixed 80.
w=$(COLUMNS=100 "$gpuaff" bind --help | widest)
((w > 80 && w <= 100)) || bad "gpuaff bind --help with COLUMNS=100 is $w columns wide (expected 81..100)"

# The options gpuaff answers by naming gpuaff-hwloc are not in its help.
fixture_json=$fixtures/dgx-h100.json
out=$("$gpuaff" bind --topology "$fixture_json" --gpu 0 --source hwloc 2>&1) && bad "gpuaff --source hwloc succeeded"
grep -q gpuaff-hwloc <<<"$out" || bad "gpuaff --source hwloc: $out"
out=$("$gpuaff" bind --hwloc-xml "$fixtures/dgx-h100.xml" --gpu 0 2>&1) && bad "gpuaff --hwloc-xml succeeded"
grep -q gpuaff-hwloc <<<"$out" || bad "gpuaff --hwloc-xml: $out"
for c in bind topo exec doctor; do
  help=$("$gpuaff" "$c" --help)
  grep -qE '^  --(source|hwloc-xml)\b' <<<"$help" && bad "gpuaff $c --help lists --source or --hwloc-xml"
  grep -qE '^  --root\b' <<<"$help" || bad "gpuaff $c --help lists no --root (is the option list there?)"
  if [[ -n $hwloc ]]; then
    help=$("$hwloc" "$c" --help)
    grep -qE '^  --hwloc-xml\b' <<<"$help" || bad "gpuaff-hwloc $c --help does not list --hwloc-xml"
    grep -qE '^  --source\b' <<<"$help" || bad "gpuaff-hwloc $c --help does not list --source"
  fi
done

# Exit codes: "  N    meaning" lines after "Exit codes:".
codes_of() { awk '/^Exit codes:/ {on = 1; next} on && /^  [0-9]+ / {print $1}' | sort -n | tr '\n' ' '; }
all=$("$gpuaff" --help | codes_of)
[[ $all == *"0 "*"2 "*"127 "* ]] || bad "gpuaff --help lists the exit codes '$all'"
declare -A owner=()
while read -r code command; do owner[$code]=$command; done < <(
  "$gpuaff" --help | awk -v commands="${commands[*]}" '
    BEGIN { n = split(commands, c, " "); for (i = 1; i <= n; i++) is_command[c[i] ":"] = 1 }
    /^Exit codes:/ {on = 1; next}
    on && /^  [0-9]+ / && ($2 in is_command) {sub(":", "", $2); print $1, $2}')
((${#owner[@]} >= 3)) || bad "gpuaff --help names no command-only exit codes: ${!owner[*]}"
for c in "${commands[@]}"; do
  got=$("$gpuaff" "$c" --help | codes_of)
  for code in $got; do
    [[ " $all " == *" $code "* ]] || bad "gpuaff $c --help lists exit code $code, which gpuaff --help does not"
    [[ -z ${owner[$code]:-} || ${owner[$code]} == "$c" ]] || bad "gpuaff $c --help lists exit code $code, ${owner[$code]}'s"
  done
  for code in "${!owner[@]}"; do
    [[ ${owner[$code]} != "$c" || " $got " == *" $code "* ]] || bad "gpuaff $c --help does not list its exit code $code"
  done
  for code in 0 1 2 3 6; do  # success, a bug, usage, an unreadable machine, a full disk: any command
    [[ " $got " == *" $code "* ]] || bad "gpuaff $c --help does not list exit code $code"
  done
done
# The codes said to be exec's are what exec ends with: a command that is not there.
"$gpuaff" exec --topology "$fixture_json" --gpu 0 --fallback unbound -- /nonexistent/command 2>/dev/null
rc=$?
[[ ${owner[$rc]:-} == exec ]] || bad "exec of a missing command exits $rc, which --help does not give as exec's"

# topo's report on every fixture, wide machines included (1152 CPUs, 64 partitions, 16 NICs).
n=0
for root in "$fixtures"/*/; do
  name=$(basename "$root")
  out=$("$gpuaff" topo --root "$root" --color never 2>/dev/null) || continue  # some roots are broken on purpose
  n=$((n + 1))
  w=$(widest <<<"$out")
  ((w <= 120)) || bad "gpuaff topo --root fixtures/$name is $w columns wide (at most 120): $(awk 'length > 120' <<<"$out" | head -1)"
done
((n >= 30)) || bad "only $n fixtures gave a report"
exit "$fail"
