"""Plumbing shared by every adapter and by the dev cluster's back-ends: server-side apply of a manifest
(:mod:`.apply`), the one async poll/wait loop (:mod:`.polling`), the harness's git push (:mod:`.git`)
and the metrics back-end's grants file (:mod:`.vmauth_grants`). It imports no adapter; every adapter,
and the dev cluster, may import it."""
