"""Git under the vault: the committer (one commit per tool write, never touching the person's
index) and the readers of a note's history."""
