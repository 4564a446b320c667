# npm-fetch.sh: the fetch of a pinned npm package into the peer cache, shared
# by fetch.sh (llama.cpp) and fetch-wllama.sh (wllama). Sourced, not run:
#
#   npm_fetch NAME SPEC SHA256 DEST WHAT REQUIRED... -- COPY_FUNCTION
#
# If DEST holds a stamp of SHA256 and every REQUIRED file, nothing is done.
# Else `npm pack SPEC` into a temporary directory under DEST's parent, the
# tarball's SHA-256 is checked, it is unpacked, COPY_FUNCTION WORK OUT copies
# what is kept from WORK/package into OUT, every REQUIRED file is checked,
# and OUT replaces DEST in one rename. NAME prefixes the messages; WHAT says
# what is downloaded (e.g. "~5.8 MB").
npm_fetch() {
  local name="$1" spec="$2" sum="$3" dest="$4" what="$5"
  shift 5
  local required=()
  while [ "$1" != "--" ]; do required+=("$1"); shift; done
  local copy="$2" f ok=1
  if [ -f "$dest/.sha256" ] && [ "$(cat "$dest/.sha256")" = "$sum" ]; then
    for f in "${required[@]}"; do [ -f "$dest/$f" ] || ok=0; done
    if [ $ok = 1 ]; then
      echo "$name: $spec ready in $dest" >&2
      return 0
    fi
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "$name: npm is needed to fetch $spec (as root: scripts/setup.sh npm)" >&2
    return 1
  fi
  mkdir -p "$(dirname "$dest")"
  work="$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "$name: npm pack $spec ($what)" >&2
  local tgz got
  tgz="$(cd "$work" && npm pack --silent "$spec" | tail -n1)"
  got="$(sha256sum "$work/$tgz" | cut -d' ' -f1)"
  if [ "$got" != "$sum" ]; then
    echo "$name: $spec: SHA-256 mismatch: got $got, want $sum" >&2
    return 1
  fi
  tar -xzf "$work/$tgz" -C "$work"
  mkdir -p "$work/out"
  "$copy" "$work" "$work/out" || return 1
  for f in "${required[@]}"; do
    [ -f "$work/out/$f" ] || { echo "$name: $spec has no $f" >&2; return 1; }
  done
  echo "$sum" >"$work/out/.sha256"
  rm -rf "$dest"
  mv "$work/out" "$dest"
  echo "$name: $spec ready in $dest" >&2
}
