#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what tools/package.sh built into dist/, the ways users install it,
# and runs it:
#   1. the static tool alone in an otherwise empty root (chroot; through a user
#      namespace when not root): no library, no /proc, /sys or /etc needed to
#      read a recorded machine
#   2. the wheel in a fresh venv whose PATH holds nothing but the venv (so no
#      compiler): `gpuaff`, `python -m gpuaff` and `import gpuaff`, and its
#      license (Apache-2.0, LICENSE inside); the .deb files' copyright (Apache-2.0)
#   3. the .deb files with apt (root only; skipped otherwise): the tool, its man
#      page (and the docs and fixtures it names) and bash completion, a consumer built with find_package from /usr,
#      and, where it was built and Slurm is installed, gpuaff-slurm's plugin in
#      Slurm's plugin directory; then removed, leaving none of their files
# Usage: tests/packaging/packaging_test.sh FIXTURES_DIR   (BUILD/fixtures)
set -euo pipefail
# Output is captured before it is searched: `cmd | grep -q` lets grep exit at its
# first match, and the command, writing on, fails on the closed pipe.
cd "$(dirname "$0")/../.."
fixtures=$(cd "$1" && pwd)
machine=$fixtures/dgx-h100
work=$(mktemp -d)
lintian_pid=""
stop_lintian() { [[ -z $lintian_pid ]] || kill "$lintian_pid" 2>/dev/null || true; }  # on a failure before its verdict
trap 'stop_lintian; rm -rf "$work"' EXIT
# GPU 3 of the DGX H100 sits on node 0 (CPUs 0-55, siblings 112-167) with GPUs
# 0-2: exclusive gives it the last quarter of the node's 56 cores, 42-55, with
# their siblings.
expected=42-55,154-167
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { printf -- '-- %s\n' "$*"; }

shopt -s nullglob
wheels=(dist/gpuaff-*.whl)
debs=(dist/gpuaff_*.deb dist/gpuaff-hwloc_*.deb)
[[ -x dist/gpuaff && ${#wheels[@]} -eq 1 && ${#debs[@]} -eq 2 ]] || fail "dist/ lacks what tools/package.sh builds; run it first"
slurm_debs=(dist/gpuaff-slurm_*.deb)  # built where slurm/spank.h is (Debian: libslurm-dev)
debs+=("${slurm_debs[@]}")

# lintian reads the .deb files alone: it runs beside the installs below, and
# its verdict is awaited before those are judged done.
if command -v lintian >/dev/null; then
  lintian --fail-on error "${debs[@]}" >"$work/lintian.log" 2>&1 &
  lintian_pid=$!
fi
lintian_verdict() {
  step "lintian: no error in the .deb files"
  if [[ -z $lintian_pid ]]; then echo "skipped: no lintian (Debian: apt-get install lintian)"; return 0; fi
  local rc=0
  wait "$lintian_pid" || rc=$?
  lintian_pid=""
  grep -v '^running with root privileges' "$work/lintian.log" || true
  ((rc == 0)) || fail "lintian reports errors"
}

step "static tool in an empty root"
if ldd dist/gpuaff >/dev/null 2>&1; then fail "dist/gpuaff has dynamic dependencies: $(ldd dist/gpuaff)"; fi
root=$work/empty
mkdir -p "$root"
cp dist/gpuaff "$root/gpuaff"
cp -a "$machine" "$root/machine"
if [[ $(id -u) -eq 0 ]]; then enter=(chroot "$root"); else enter=(unshare -r chroot "$root"); fi
got=$("${enter[@]}" /gpuaff bind --root /machine --gpu 3 --policy exclusive) || fail "the static tool did not run in an empty root"
[[ $got == "$expected" ]] || fail "static tool: GPU 3 exclusive is '$got', not $expected"
out=$("${enter[@]}" /gpuaff topo --root /machine) || fail "static tool: topo failed in the empty root"
grep -q '^GPUs' <<<"$out" || fail "static tool: topo printed no GPU table"
ls -A "$root" | sort | tr '\n' ' ' | grep -qx 'gpuaff machine ' || fail "the empty root holds more than the tool and the machine"

step "wheel in a fresh venv, nothing else on PATH"
/usr/bin/python3 -m venv "$work/venv"
venv=$work/venv
clean=(env -i "PATH=$venv/bin" "HOME=$work" "TMPDIR=$work")
"${clean[@]}" "$venv/bin/python" -m pip install -q --no-index "${wheels[0]}" || fail "pip install of the wheel failed"
[[ $(head -c 4 "$venv/bin/gpuaff" | od -An -c | tr -d ' ') == '177ELF' ]] || fail "venv/bin/gpuaff is not the binary"
got=$("${clean[@]}" gpuaff bind --root "$machine" --gpu 3 --policy exclusive) || fail "the wheel's gpuaff did not run"
[[ $got == "$expected" ]] || fail "wheel gpuaff: '$got', not $expected"
shipped=$("${clean[@]}" "$venv/bin/python" -c "import gpuaff, os; print(os.path.dirname(gpuaff.__file__))")/fixtures
got=$("${clean[@]}" gpuaff bind --root "$shipped/dgx-h100.tar.xz" --gpu 3 --policy exclusive) ||
  fail "the wheel's fixture $shipped/dgx-h100.tar.xz did not read"
[[ $got == "$expected" ]] || fail "wheel gpuaff on its own fixture: '$got', not $expected"
out=$("${clean[@]}" "$venv/bin/python" -m gpuaff --version) || fail "python -m gpuaff --version failed"
grep -q '^gpuaff [0-9]' <<<"$out" || fail "python -m gpuaff --version printed '$out'"
got=$("${clean[@]}" "$venv/bin/python" -c "import gpuaff; print(gpuaff.plan(gpu=3, policy='exclusive', root='$machine').cpulist)") ||
  fail "import gpuaff in the venv"
[[ $got == "$expected" ]] || fail "wheel module: '$got', not $expected"
got=$("${clean[@]}" "$venv/bin/python" -c "import importlib.metadata as m
print(m.metadata('gpuaff')['License'])
print(*[f.locate() for f in m.files('gpuaff') if f.name == 'LICENSE'])") || fail "the wheel's metadata"
[[ ${got%%$'\n'*} == Apache-2.0 ]] || fail "the wheel's License is '${got%%$'\n'*}', not Apache-2.0"
cmp -s "${got#*$'\n'}" LICENSE || fail "the wheel holds no copy of LICENSE"

step "the .deb files' copyright: Apache-2.0 (DEP-5)"
for deb in "${debs[@]}"; do
  pkg=$(dpkg-deb -f "$deb" Package)
  got=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "./usr/share/doc/$pkg/copyright") || fail "$deb has no copyright file"
  grep -qx 'License: Apache-2.0' <<<"$got" || fail "$deb: its copyright file does not say Apache-2.0"
done

step "Debian packages with apt"
if [[ $(id -u) -ne 0 ]]; then
  echo "skipped: installing .deb files needs root (CI runs this as root)"
  lintian_verdict
  exit 0
fi
if dpkg -s gpuaff >/dev/null 2>&1; then fail "a gpuaff package is installed already; remove it first"; fi
# gpuaff-slurm needs the Slurm release it was built for; installed only where
# that Slurm is (nothing is fetched for it).
packages=(gpuaff gpuaff-hwloc)
install=(dist/gpuaff_*.deb dist/gpuaff-hwloc_*.deb)
if ((${#slurm_debs[@]})) && dpkg -s slurm-wlm-basic-plugins >/dev/null 2>&1; then
  packages+=(gpuaff-slurm)
  install+=("${slurm_debs[@]}")
elif ((${#slurm_debs[@]})); then
  echo "gpuaff-slurm not installed: no slurm-wlm-basic-plugins here"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${install[@]/#/./}" >/dev/null || fail "apt-get install of the .deb files"
removed=0
cleanup_debs() { ((removed)) || DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null || true; }
trap 'cleanup_debs; stop_lintian; rm -rf "$work"' EXIT
got=$(/usr/bin/gpuaff bind --root "$machine" --gpu 3 --policy exclusive) || fail "/usr/bin/gpuaff did not run"
[[ $got == "$expected" ]] || fail "installed gpuaff: '$got', not $expected"
out=$(/usr/bin/gpuaff-hwloc --version) || fail "/usr/bin/gpuaff-hwloc --version failed"
grep -q '^gpuaff' <<<"$out" || fail "/usr/bin/gpuaff-hwloc --version printed '$out'"
[[ -f /usr/share/man/man1/gpuaff.1.gz ]] || fail "no man page"
out=$(zcat /usr/share/man/man1/gpuaff.1.gz) || fail "the man page is not gzip"
grep -qF '.BI \-\-policy' <<<"$out" || fail "the man page lacks --policy"
# What the man page's FILES section names is installed: the docs and the fixtures.
named=$(awk '/^\.SH FILES/ {on = 1; next} /^\.SH/ {on = 0} on && /^\.I / {print $2}' <<<"$out" | sed 's/\\-/-/g')
[[ $(wc -l <<<"$named") -ge 2 ]] || fail "the man page's FILES section names '$named'"
for path in $named; do [[ -e $path ]] || fail "the man page names $path, which the package did not install"; done
[[ -f /usr/share/doc/gpuaff/docs/cli.md ]] || fail "no /usr/share/doc/gpuaff/docs/cli.md"
got=$(/usr/bin/gpuaff bind --root /usr/share/gpuaff/fixtures/dgx-h100.tar.xz --gpu 3 --policy exclusive) ||
  fail "the installed fixture did not read"
[[ $got == "$expected" ]] || fail "installed gpuaff on the installed fixture: '$got', not $expected"
got=$(bash -c 'source /usr/share/bash-completion/completions/gpuaff
  COMP_WORDS=(gpuaff bind --pol); COMP_CWORD=2; _gpuaff; echo "${COMPREPLY[*]}"
  COMP_WORDS=(gpuaff exec --policy ex); COMP_CWORD=3; _gpuaff; echo "${COMPREPLY[*]}"')
[[ $got == $'--policy\nexclusive' ]] || fail "bash completion gave '$got'"
cmake -S tests/consumer -B "$work/consumer" >/dev/null || fail "find_package(gpuaff) from /usr"
cmake --build "$work/consumer" -j "$(nproc)" >/dev/null || fail "the consumer did not build against /usr"
out=$("$work/consumer/consumer_api" "$machine") || fail "consumer_api against /usr failed"
grep -q '^exclusive: .* 42-55,154-167 ' <<<"$out" || fail "consumer_api against /usr: $out"
if [[ " ${packages[*]} " == *" gpuaff-slurm "* ]]; then
  # Slurm's own plugins are in the directory the package puts it in, and the
  # plugin exports what slurmstepd and srun look up.
  plugin=$(dpkg -L gpuaff-slurm | grep '/spank_gpuaff\.so$') || fail "gpuaff-slurm holds no spank_gpuaff.so"
  dir=$(dirname "$plugin")
  [[ $(dpkg -S "$dir/libslurmfull.so" 2>/dev/null) == slurm-wlm-basic-plugins:* ]] ||
    fail "spank_gpuaff.so is in $dir, not in Slurm's plugin directory"
  symbols=$(nm -D --defined-only "$plugin") || fail "nm -D $plugin"
  for sym in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init slurm_spank_task_init; do
    grep -qw "$sym" <<<"$symbols" || fail "spank_gpuaff.so does not export $sym"
  done
fi
files=$(dpkg -L "${packages[@]}" | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done || true)
[[ $(wc -l <<<"$files") -gt 40 ]] || fail "dpkg -L lists only $(wc -l <<<"$files") files"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null || fail "apt-get purge"
removed=1
left=$(for f in $files; do [[ -e $f ]] && echo "$f"; done || true)
[[ -z $left ]] || fail "files left after purge: $left"
[[ ! -e /usr/include/gpuaff ]] || fail "/usr/include/gpuaff left after purge"
lintian_verdict
echo "packaging: all installs work"
