#!/usr/bin/env bash
# deps_guard.sh BUILD_DIR [options]: prove that scripts/deps.sh installs everything CMake's configure step found.
#
# For every file the configure step used, as recorded in BUILD_DIR/CMakeCache.txt:
#   - each package found by find_package / find_dependency (a <Pkg>_DIR entry: its <Pkg>Config.cmake or
#     <pkg>-config.cmake), which is how Qt6Charts pulls in Qt6OpenGL;
#   - each program or library found by find_program / find_library (a FILEPATH entry: the compiler, ninja, libGL, ...),
# it asks dpkg which Debian package owns the file and fails, naming the cache entry, the file and the package, unless
# that package is in deps.sh's list or in the Depends (and Pre-Depends) closure of a listed package. A package that is
# only Recommended does not count: deps.sh installs with --no-install-recommends, as a fresh machine would.
#
# Files owned by no Debian package fail too. Two kinds of finds are optional and only counted in a note:
#   - the CUDA calibration benches' (the CUDA toolkit, NCCL, a pip wheel's cuBLASLt and the Python that locates it:
#     calibrate/bench/CMakeLists.txt, built only where a CUDA compiler is found; not Debian packages);
#   - optional components that CMake's modules look for on the way and no target links: FindOpenGL's EGL and GLU
#     (Qt's WrapOpenGL uses OpenGL::GL only), Qt6Gui's optional XKB (Qt6GuiDependencies.cmake marks it optional), and
#     the dashboard tools include(CTest) looks for (git, valgrind, gcov, ...: used only by `ctest -D` submissions).
# Directories found by find_path (include directories) are not checked: a directory has many owners; the library found
# with them is.
#
# Options:
#   --packages "a b c"  the package list to check against (default: `bash scripts/deps.sh --list fuzz`)
#   --owners FILE       recorded ownership, lines "<path>\t<pkg>[ <pkg>...]" ('-' for none), instead of dpkg -S
#   --closure FILE      recorded closure, one package per line, instead of apt-cache depends --recurse
#   --record DIR        also write the ownership and closure this run used to DIR/owners.tsv and DIR/closure.txt
# A recorded case (tests/deps_guard/) replays a real machine's answers so that the guard itself is tested anywhere.
# Exit: 0 all found files are covered, 1 some are not, 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

usage() { echo "usage: deps_guard.sh BUILD_DIR [--packages LIST] [--owners FILE] [--closure FILE] [--record DIR]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
build="$1"; shift
packages="" owners_file="" closure_file="" record=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --packages) [[ $# -ge 2 ]] || usage; packages="$2"; shift 2 ;;
    --owners) [[ $# -ge 2 ]] || usage; owners_file="$2"; shift 2 ;;
    --closure) [[ $# -ge 2 ]] || usage; closure_file="$2"; shift 2 ;;
    --record) [[ $# -ge 2 ]] || usage; record="$2"; shift 2 ;;
    *) echo "deps_guard: unknown option '$1'" >&2; usage ;;
  esac
done
cache="$build/CMakeCache.txt"
if [[ ! -f "$cache" ]]; then
  echo "deps_guard: $cache not found: run the configure step (cmake --preset ...) first" >&2
  exit 2
fi
for f in "$owners_file" "$closure_file"; do
  if [[ -n "$f" && ! -f "$f" ]]; then echo "deps_guard: $f not found" >&2; exit 2; fi
done
[[ -n "$packages" ]] || packages="$(bash "$here/deps.sh" --list fuzz | tr '\n' ' ')"

# The closure: every package apt would install for the list without recommends. Top-level lines of the recursive
# listing are the packages reached; a virtual package (<name>) is satisfied by the providers listed under it.
declare -A in_closure=()
if [[ -n "$closure_file" ]]; then
  closure="$(cat "$closure_file")"
else
  # shellcheck disable=SC2086
  closure="$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
               --no-enhances $packages 2>/dev/null |
             awk '/^[^ ]/ { print } /^    [^ ]/ { print $1 }' | sed -e 's/^<//' -e 's/>$//' -e 's/:.*$//' | sort -u)"
fi
for p in $packages $closure; do in_closure["$p"]=1; done

# The files: <Pkg>_DIR entries name a package's config directory, FILEPATH entries a program or library.
src_dir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")"
entries="$(awk -F= '
  /^[A-Za-z0-9_.+-]+_DIR:PATH=/ { split($1, k, ":"); print k[1] "\t" substr($0, length($1) + 2); next }
  /^[A-Za-z0-9_.+-]+:FILEPATH=/ { split($1, k, ":"); print k[1] "\t" substr($0, length($1) + 2) }' "$cache")"

# Optional finds (see the header): the CUDA benches, and components no target links.
optional_entry() {
  [[ "$1" =~ ^(CUDA|CUDAToolkit_|CMAKE_CUDA_|GPUPLAN_CUBLASLT_|GPUPLAN_NCCL_|_gpuplan_python) ]] && return 0
  [[ "$1" =~ ^(OPENGL_egl_LIBRARY|OPENGL_glu_LIBRARY|XKB_LIBRARY)$ ]] && return 0
  [[ "$1" =~ ^(GITCOMMAND|MEMORYCHECK_COMMAND|COVERAGE_COMMAND|CVSCOMMAND|SVNCOMMAND|HGCOMMAND|BZRCOMMAND|P4COMMAND)$ ]]
}

declare -A recorded_owner=()
if [[ -n "$owners_file" ]]; then
  while IFS=$'\t' read -r path pkgs; do [[ -n "$path" ]] && recorded_owner["$path"]="$pkgs"; done <"$owners_file"
fi
# owners PATH: the packages owning PATH, space-separated ('-' for none). dpkg records some files under /usr and some
# under / (Debian 12 is merged-/usr), and a program may be an alternatives symlink: try the path, its /-or-/usr twin,
# then the resolved file.
owners() {
  local path="$1"
  if [[ -n "$owners_file" ]]; then echo "${recorded_owner[$path]:--}"; return; fi
  local tries=("$path") real
  [[ "$path" == /usr/* ]] && tries+=("${path#/usr}") || tries+=("/usr$path")
  real="$(readlink -f "$path" 2>/dev/null || true)"
  if [[ -n "$real" && "$real" != "$path" ]]; then
    tries+=("$real")
    [[ "$real" == /usr/* ]] && tries+=("${real#/usr}") || tries+=("/usr$real")
  fi
  local t out
  for t in "${tries[@]}"; do
    out="$(dpkg -S "$t" 2>/dev/null | grep -v '^diversion by' | sed -n '1s/: .*$//p' | tr -d ' ' | tr ',' ' ' |
           sed 's/:[a-z0-9_]*//g')" || true
    if [[ -n "$out" ]]; then echo "$out"; return; fi
  done
  echo "-"
}

[[ -z "$record" ]] || { mkdir -p "$record"; : >"$record/owners.tsv"; printf '%s\n' $closure >"$record/closure.txt"; }
fails=0 checked=0 optional=0 dirs=0
while IFS=$'\t' read -r name value; do
  [[ -n "$name" ]] || continue
  [[ "$value" == *NOTFOUND* || "$value" != /* ]] && continue
  [[ -n "$src_dir" && "$value" == "$src_dir"/* ]] && continue  # the project's own tree
  file="$value"
  if [[ "$name" == *_DIR ]]; then
    pkg="${name%_DIR}"
    lower="$(echo "$pkg" | tr '[:upper:]' '[:lower:]')"
    file=""
    for c in "$value/${pkg}Config.cmake" "$value/${lower}-config.cmake" "$value/${pkg}-config.cmake"; do
      if [[ -n "$owners_file" && -n "${recorded_owner[$c]:-}" ]] || [[ -z "$owners_file" && -f "$c" ]]; then
        file="$c"; break
      fi
    done
    [[ -n "$file" ]] || { dirs=$((dirs + 1)); continue; }  # an include directory (find_path), not a package
  elif [[ -z "$owners_file" && ! -e "$value" ]]; then
    continue
  fi
  if optional_entry "$name"; then optional=$((optional + 1)); continue; fi
  checked=$((checked + 1))
  who="$(owners "$file")"
  [[ -z "$record" ]] || printf '%s\t%s\n' "$file" "$who" >>"$record/owners.tsv"
  if [[ "$who" == "-" ]]; then
    echo "deps_guard: FAIL $name = $value: $file belongs to no Debian package, so a fresh machine will not have it" \
         "(CMakeCache.txt: $cache)" >&2
    fails=$((fails + 1))
    continue
  fi
  ok=0
  for p in $who; do [[ -n "${in_closure[$p]:-}" ]] && ok=1; done
  if ((ok == 0)); then
    echo "deps_guard: FAIL $name = $value: $file is from Debian package '$who', which scripts/deps.sh does not" \
         "install: it is neither in deps.sh's list nor in the Depends closure of a listed package (a Recommends does" \
         "not count with --no-install-recommends). Add '$who' to scripts/deps.sh." >&2
    fails=$((fails + 1))
  fi
done <<<"$entries"

echo "deps_guard: note: $optional optional finds not checked (CUDA benches, unlinked components, CTest dashboard tools), $dirs include" \
     "directories not checked"
if ((checked == 0)); then
  echo "deps_guard: FAIL no package or program entries in $cache: nothing was checked" >&2
  exit 1
fi
if ((fails)); then
  echo "deps_guard: $fails of $checked files CMake found are not installed by scripts/deps.sh" >&2
  exit 1
fi
echo "deps_guard: all $checked files CMake found ($build) come from packages scripts/deps.sh installs"
