#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that the project says everywhere that it is Apache-2.0:
#   - every source file of the tree (C and C++, Python and its stubs, shell
#     scripts and any other file starting with #!, CMake files) carries the line
#     `SPDX-License-Identifier: Apache-2.0` in a comment near its top: the
#     first line, or the second after a #! line;
#   - LICENSE at the top is the Apache License 2.0 (Debian's
#     /usr/share/common-licenses/Apache-2.0, byte for byte, where that exists);
#   - the wheel's metadata (python/setup.py) and the .deb files' copyright file
#     (cmake/copyright, a machine-readable DEP-5 file) name Apache-2.0 (the
#     packages themselves are checked by tests/packaging/packaging_test.sh).
# Data (fixtures' archives and JSON, the fuzz corpus), Markdown and other text
# files are not source files and are not checked.
# Prints each file that fails and why; exits 1 if any does.
# Usage: tools/check-spdx.sh [SOURCE_DIR]   (default: this script's checkout)
set -euo pipefail
top=${1:-$(dirname "$0")/..}
cd "$top"
spdx='SPDX-License-Identifier: Apache-2.0'
bad=0
fail() { echo "check-spdx: $*" >&2; bad=1; }

# The tracked files and those not yet added (not the ignored ones); outside a
# git checkout (a source tarball), every file but build trees and packages.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)  # new files too
else
  mapfile -t files < <(find . -path ./.git -prune -o \( -path './build*' -o -path ./dist -o -path ./out \
    -o -path ./python/build -o -name '*.egg-info' \) -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort)
fi

# The comment a file's SPDX line is written in (into $comment), or nothing for
# a file that is not a source file. $2: the file's first two characters.
# Builtins only: this runs for every file of the tree.
comment_of() {
  comment=''
  case $1 in
    fixtures/*.py) comment='#' ;;  # generate.py; the rest of fixtures/ is data
    fixtures/* | tests/fuzz/corpus/*) ;;
    *.c) comment='/*' ;;
    *.h | *.hpp | *.cpp) comment='//' ;;
    *.py | *.pyi | *.sh | *.cmake | *.cmake.in | CMakeLists.txt | */CMakeLists.txt) comment='#' ;;
    *) [[ $2 == '#!' ]] && comment='#' ;;
  esac
  return 0
}

checked=0
for f in "${files[@]}"; do
  [[ -f $f ]] || continue  # tracked but deleted in the work tree
  start=''
  IFS= read -r -n 2 start <"$f" || true
  comment_of "$f" "$start"
  [[ -n $comment ]] || continue
  checked=$((checked + 1))
  case $comment in
    '/*') want="/* $spdx */" ;;
    *) want="$comment $spdx" ;;
  esac
  first='' second=''
  { IFS= read -r first || true; IFS= read -r second || true; } <"$f"
  line=1 got=$first
  [[ $start == '#!' ]] && line=2 got=$second
  [[ $got == "$want" ]] || fail "$f: line $line is not '$want'"
done
# The scan must have seen the tree: a wrong directory passes nothing.
((checked > 100)) || fail "only $checked source files found under $PWD; is it gpuaff's source tree?"

if [[ ! -f LICENSE ]]; then
  fail "LICENSE: missing"
elif [[ -f /usr/share/common-licenses/Apache-2.0 ]]; then
  cmp -s LICENSE /usr/share/common-licenses/Apache-2.0 ||
    fail "LICENSE: not /usr/share/common-licenses/Apache-2.0"
else
  grep -q 'Version 2.0, January 2004' LICENSE && grep -q 'Apache License' LICENSE ||
    fail "LICENSE: not the Apache License 2.0"
fi

# The wheel's metadata: the License field and the classifier, as setuptools
# reads them from setup.py (the grep stands in where setuptools or pybind11,
# which setup.py imports, are missing). PYTHON as for tools/package.sh: by
# default Debian's, which has both.
python=${PYTHON:-python3}
[[ -z ${PYTHON:-} && -x /usr/bin/python3 ]] && python=/usr/bin/python3
if "$python" -c 'import setuptools, pybind11' 2>/dev/null; then
  meta=$(cd python && "$python" setup.py -q --license --classifiers 2>/dev/null) || meta=''
else
  meta=$(grep -oE "license=\"[^\"]*\"|\"License :: [^\"]*\"" python/setup.py | tr -d '"' | sed 's/^license=//') || meta=''
fi
grep -qx 'Apache-2.0' <<<"$meta" || fail "python/setup.py: the wheel's License is not Apache-2.0 (got: ${meta:-nothing})"
grep -qx 'License :: OSI Approved :: Apache Software License' <<<"$meta" ||
  fail "python/setup.py: the wheel lacks the classifier 'License :: OSI Approved :: Apache Software License'"

# The .deb files' /usr/share/doc/PACKAGE/copyright (cmake/GpuaffPackage.cmake
# installs cmake/copyright): DEP-5, every file Apache-2.0, the text in
# common-licenses.
copyright=cmake/copyright
head -1 "$copyright" | grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  fail "$copyright: not a machine-readable (DEP-5) copyright file"
grep -qx 'Files: \*' "$copyright" || fail "$copyright: no 'Files: *' paragraph"
grep -qx 'License: Apache-2.0' "$copyright" || fail "$copyright: no 'License: Apache-2.0'"
grep -q '/usr/share/common-licenses/Apache-2.0' "$copyright" ||
  fail "$copyright: does not refer to /usr/share/common-licenses/Apache-2.0"
if grep -n -i -E '^License: .*' "$copyright" | grep -v -x '[0-9]*:License: Apache-2.0' >&2; then
  fail "$copyright: a license other than Apache-2.0"
fi

((bad == 0)) || exit 1
echo "check-spdx: $checked source files carry '$spdx'; LICENSE, the wheel and the .deb copyright say Apache-2.0"
