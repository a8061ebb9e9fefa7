# Shared by hack/build-components*.sh: a Go build that says what it builds,
# about how long it takes, and shows progress while it runs. Source it.

# go_build NAME DIR PACKAGE LDFLAGS OUT ESTIMATE builds PACKAGE in module
# directory DIR into OUT. ESTIMATE is the cold-cache time measured on 2
# cores, shown up front. While the build runs, a progress line every 15 s
# counts the packages compiled so far out of PACKAGE's dependencies (go
# build -v names each package it compiles; cached ones are not counted).
go_build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4 out=$5 estimate=$6
  echo "build $name ($pkg): about $estimate from a cold Go cache on 2 cores, seconds when cached"
  (cd "$dir" && go mod download) # says "go: downloading ..." the first time
  local total
  total=$(cd "$dir" && go list -deps "$pkg" | wc -l)
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 go build -v -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg" 2>&1) |
    _build_progress "$name" "$total" "$start"
  mv "$out.tmp" "$out"
  echo "built $name in $(_duration $((SECONDS - start)))"
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
