"""Trust hooks in a Codex home as a person does in Codex's /hooks browser (tests only).

Codex runs a user's hook only once its current definition is trusted: ``[hooks.state."<key>"]
trusted_hash = "<hash>"`` in config.toml, with the key and hash Codex's app server reports
(``hooks/list``). Reading them from Codex itself keeps the test honest about what Codex runs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def trust_hooks(codex: Path, env: dict, cwd: Path, config: Path) -> list[str]:
    """Trust every untrusted hook Codex lists for ``cwd``; returns the commands trusted."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    proc = subprocess.Popen(
        [str(codex), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
    proc.stdin.flush()
    hooks = None
    try:
        for line in proc.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                hooks = [h for d in message["result"]["data"] for h in d["hooks"]]
                break
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert hooks is not None, "codex app-server did not answer hooks/list"
    added = ""
    for hook in hooks:
        if hook["trustStatus"] != "trusted":
            added += f"\n[hooks.state.{json.dumps(hook['key'])}]\ntrusted_hash = {json.dumps(hook['currentHash'])}\n"
    with config.open("a", encoding="utf-8") as f:
        f.write(added)
    return [h["command"] for h in hooks]
