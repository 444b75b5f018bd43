#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The docs' command lines, run as written. A fenced block right after the
# line `<!-- runnable -->` in README.md, docs/*.md or examples/README.md is
# run line by line (a line ending in '\' continues on the next; '#' lines and
# blank lines are skipped; in a block whose commands start with "$ ", only
# those lines are commands, the others their output) with bash, in a scratch
# folder that holds `fixtures/` (every fixture as shipped, NAME.tar.xz, and
# as the build unpacks it, NAME/ and NAME.json) and nothing else, with the
# built gpuaff first in PATH. A line that fails is named by file and line.
# Mark only lines that run on any CI machine: no GPU, no network, no Slurm
# controller. A line whose program is not installed here (torchrun, mpirun)
# is skipped, and the test with it (exit 77) unless another line failed.
#
# Every shell line of those files, marked or not, is also held to what
# Debian 12 has: `python3` (there is no `python`), and a torchrun line in
# torch 1.13's spelling (--nproc_per_node) passes --redirects 1 --tee 1,
# without which torch 1.13 crashes on its default output handling.
#   doc_lines_test.sh GPUAFF SOURCE_DIR FIXTURES_DIR
set -uo pipefail
gpuaff=$1 src=$(cd "$2" && pwd) built=$(cd "$3" && pwd)
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$(cd "$(dirname "$gpuaff")" && pwd)

docs=("$src/README.md" "$src"/docs/*.md "$src/examples/README.md")

# awk prints one record per command line and per line of output shown after
# a "$ " command: "<file>\t<line>\t<run>\t<block>\t<cmd|out>\t<text>" (run 1: marked).
listing=$(awk '
  function emit(kind, at, text) { printf "%s\t%d\t%d\t%d\t%s\t%s\n", FILENAME, at, run, blocks, kind, text }
  FNR == 1 { marked = 0; fence = 0 }
  /^<!-- runnable -->$/ { marked = 1; next }
  /^```/ {
    if (!fence) { fence = 1; blocks++; lang = substr($0, 4); run = marked; marked = 0; n = 0; next }
    # the block ends: its commands (and, after a "$ " command, its output)
    shell = lang == "sh" || lang == "bash" || lang == "console" || lang == ""
    prompt = 0
    for (i = 1; i <= n; i++) if (body[i] ~ /^\$ /) prompt = 1
    cmd = ""; start = 0; in_output = 0
    for (i = 1; i <= n; i++) {
      line = body[i]
      if (cmd == "") {
        if (prompt && line !~ /^\$ /) { if (in_output && shell && line !~ /^[ \t]*#/) emit("out", at[i], line); continue }
        if (prompt) line = substr(line, 3)
        if (line ~ /^[ \t]*(#|$)/) continue
        start = at[i]
      }
      if (line ~ /\\$/) { cmd = cmd substr(line, 1, length(line) - 1); continue }
      cmd = cmd line
      if (shell) emit("cmd", start, cmd)
      cmd = ""; in_output = prompt
    }
    fence = 0; run = 0; next
  }
  fence { body[++n] = $0; at[n] = FNR; next }
  { if ($0 !~ /^[ \t]*$/) marked = 0 }
' "${docs[@]}")

# What Debian 12 has, on every shell line.
while IFS=$'\t' read -r file line run block kind cmd; do
  [[ $kind == cmd ]] || continue
  where="${file#"$src"/}:$line"
  if [[ $cmd =~ (^|[[:space:]\;\&\|\(\"\'])python([[:space:]]|$) ]]; then
    bad "$where calls 'python', which Debian 12 does not have; write python3: $cmd"
  fi
  if [[ $cmd == *torchrun* && $cmd == *--nproc_per_node* && $cmd != *"--redirects 1 --tee 1"* ]]; then
    bad "$where: torch 1.13's torchrun needs --redirects 1 --tee 1: $cmd"
  fi
done <<<"$listing"

# The scratch folder's fixtures: as shipped and as built.
mkdir -p "$tmp/fixtures"
for f in "$src"/fixtures/*.tar.xz "$src"/fixtures/*.json "$src"/fixtures/*.xml; do ln -s "$f" "$tmp/fixtures/"; done
for f in "$built"/*; do [[ -e $tmp/fixtures/$(basename "$f") ]] || ln -s "$f" "$tmp/fixtures/"; done

# One marked command: run it; when the doc shows its output (and elides
# nothing with "..."), the output must be that.
ran=0 skipped=0
run_one() {  # WHERE BLOCK COMMAND EXPECTED
  local where=$1 block=$2 cmd=$3 expected=$4 work=$tmp/block-$2 out
  if [[ ! -d $work ]]; then  # the lines of one block share a folder: one may read what another wrote
    mkdir -p "$work"
    ln -s "$tmp/fixtures" "$work/fixtures"
  fi
  local program=${cmd%% *}
  if [[ $program != *=* ]] && ! PATH="$bin:$PATH" command -v "$program" >/dev/null; then
    echo "skipped: $where needs $program, not installed here"
    skipped=$((skipped + 1))
    return
  fi
  ran=$((ran + 1))
  if ! out=$(cd "$work" && PATH="$bin:$PATH" timeout 120 bash -o pipefail -c "$cmd" 2>&1 </dev/null); then
    bad "$where exited non-zero: $cmd"
    tail -5 <<<"$out" | sed 's/^/    /'
  elif [[ -n $expected && $expected != *...* && $out != "$expected" ]]; then
    bad "$where prints other than the doc shows: $cmd"
    diff <(echo "$expected") <(echo "$out") | head -10 | sed 's/^/    /'
  fi
}
pending=() expected=""
while IFS=$'\t' read -r file line run block kind text; do
  [[ $run == 1 ]] || continue
  if [[ $kind == out ]]; then
    expected+="${expected:+$'\n'}$text"
    continue
  fi
  ((${#pending[@]} == 0)) || run_one "${pending[@]}" "$expected"
  pending=("${file#"$src"/}:$line" "$block" "$text") expected=""
done <<<"$listing"
((${#pending[@]} == 0)) || run_one "${pending[@]}" "$expected"

((ran >= 10)) || bad "only $ran marked lines found (is the <!-- runnable --> marker still used?)"
((fail == 0 && skipped > 0)) && exit 77  # a launcher missing here: the lines that need it did not run
((fail == 0)) && echo "PASS: $ran marked doc lines ran; every one of the $(grep -c $'\tcmd\t' <<<"$listing") shell lines says python3 and torch 1.13's flags"
exit "$fail"
