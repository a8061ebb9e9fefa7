# Shared by hack/build-components*.sh: a Go build that says what it builds,
# about how long it takes, and shows progress while it runs. Source it.

# go_build LABEL DIR LDFLAGS OUTDIR ESTIMATE NAME=PACKAGE... builds each
# PACKAGE of the module in directory DIR into OUTDIR/NAME, in one go build,
# so that their shared packages compile once and both cores stay busy while
# one binary links. ESTIMATE is the cold-cache time measured on 2 cores,
# shown up front. While the build runs, a progress line every 15 s counts the
# packages compiled so far out of the packages' dependencies (go build -v
# names each package it compiles; cached ones are not counted). Extra go
# build flags come from GO_BUILD_FLAGS. The compiler writes no DWARF, which
# -s -w would strip from the binaries anyway: a cold build of
# kube-scheduler took 435 s instead of 485 s and 833 CPU-seconds instead of
# 932 on 2 cores. The Makefile compiles dkc with the same flags, so that
# their shared packages compile once.
go_build() {
  local label=$1 dir=$2 ldflags=$3 outdir=$4 estimate=$5
  shift 5
  local names=() pkgs=() spec
  for spec in "$@"; do
    names+=("${spec%%=*}")
    pkgs+=("${spec#*=}")
  done
  echo "build $label (${names[*]}): about $estimate from a cold Go cache on 2 cores, seconds when cached"
  (cd "$dir" && go mod download) # says "go: downloading ..." the first time
  local total
  total=$(cd "$dir" && go list -deps "${pkgs[@]}" | wc -l)
  local start=$SECONDS tmp
  tmp=$(mktemp -d "$outdir/.build.XXXXXX")
  # shellcheck disable=SC2086 # GO_BUILD_FLAGS is a list of flags
  (cd "$dir" && CGO_ENABLED=0 go build -v -trimpath -gcflags=all=-dwarf=false ${GO_BUILD_FLAGS:-} -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" 2>&1) |
    _build_progress "$label" "$total" "$start"
  local i
  for i in "${!names[@]}"; do
    mv "$tmp/$(basename "${pkgs[$i]}")" "$outdir/${names[$i]}"
  done
  rm -rf "$tmp"
  echo "built $label in $(_duration $((SECONDS - start)))"
}

# _build_progress NAME TOTAL START reads go build -v output: package paths
# are counted, anything else (compiler errors) is printed as it comes.
_build_progress() {
  local name=$1 total=$2 start=$3 n=0 next=$((SECONDS + 15)) line
  while IFS= read -r line; do
    if [[ $line =~ ^[A-Za-z0-9_./~+-]+$ ]]; then
      n=$((n + 1))
    else
      printf '%s\n' "$line"
    fi
    if ((SECONDS >= next)); then
      echo "  $name: $n of $total packages compiled, $(_duration $((SECONDS - start))) so far"
      next=$((SECONDS + 15))
    fi
  done
}

_duration() { # SECONDS as "4m05s"
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}
