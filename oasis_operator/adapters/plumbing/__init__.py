"""Plumbing shared by every adapter: server-side apply of a manifest (:mod:`.apply`) and the one
async poll/wait loop (:mod:`.polling`). It imports no adapter; every adapter may import it."""
