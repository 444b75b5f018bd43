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
for command in bind topo exec record doctor; do
  # The man page's section for the command: from its .SS line to the next .SS/.SH.
  section=$(awk -v want=".SS \"gpuaff $command\"" '$0 == want {on = 1; next} /^\.S[SH] / {on = 0} on' "$man")
  [[ -n $section ]] || { echo "FAIL: the man page has no section for $command"; fail=1; continue; }
  words=$(sed -n "s/^    $command) COMPREPLY=(\$(compgen -W '\\([^']*\\)'.*/\\1/p" "$completion")
  [[ -n $words ]] || { echo "FAIL: the completion has no words for $command"; fail=1; continue; }
  flags=$("$gpuaff" "$command" --help | grep -oE '^  (-h,)?--[a-z][a-z-]*' | sed 's/^  //; s/^-h,//' | sort -u)
  [[ $(wc -l <<<"$flags") -ge 3 ]] || { echo "FAIL: $command --help lists too few flags: $flags"; fail=1; }
  for flag in $flags; do
    [[ $flag == --help ]] && continue
    escaped=${flag//-/\\-}
    grep -qE "^\.BI? ${escaped//\\/\\\\}( |$)" <<<"$section" || { echo "FAIL: man page, $command: no $flag"; fail=1; }
    grep -qw -- "$flag" <<<"$words" || { echo "FAIL: completion, $command: no $flag"; fail=1; }
  done
done
# Values: the policy names after --policy, bind's formats after --format.
got=$(bash -c 'source "$1"
  COMP_WORDS=(gpuaff bind --policy ""); COMP_CWORD=3; _gpuaff; echo "${COMPREPLY[*]}"
  COMP_WORDS=(gpuaff bind --format ""); COMP_CWORD=3; _gpuaff; echo "${COMPREPLY[*]}"
  COMP_WORDS=(gpuaff ""); COMP_CWORD=1; _gpuaff; echo "${COMPREPLY[*]}"' _ "$completion")
expected="node socket exclusive core-complex all single single-unique unique-interleaved unique-contiguous
cpulist mask numactl json env
bind topo exec record doctor --help --version"
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
((fail == 0)) && echo "man page and completion list every flag of every command"
exit $fail
