"""What a writing call changed, and its code-bearing changes held for a person.

    service.py      ChangeTracker: begin a run, hold what it changed, ask, re-apply
    following.py    background tasks: checked while they run and at their end
    tracked.py      one run: its fanotify group, its change log, its change set
    changeset.py    ChangeSet: added / changed / deleted paths from the run's events
    reader.py       the run's reader, pid 1 of the run's pid namespace (in the shim)
    host.py         the host watch, daemon side: listed names anyone makes meanwhile
    hostwatch.py    the host watch's own process (`python -m agentd.changes.hostwatch`)
    fanotify.py     the kernel interface: groups, marks, events
    resolve.py      directory handles back to paths
    walk.py         Baseline: a root's code-bearing files as last known good
    holding.py      Held: finding, reverting, re-applying, the diff a person sees
    prompt.py       what a person is asked and the model told
    files.py        Entry, and file work beneath a root without following links
    checkpoints.py  Checkpoints: each writing call's change set with its images
    images.py       a path's image (file, link, directory, absent), read without links
    blobs.py        the content-addressed store of the images' contents
    gitblobs.py     pre-images from git's index, read by git as the session's identity
    diffs.py        a call's (or calls') changes as names, a stat or a unified diff
    restore.py      restore and rewind: the plan, its conflicts, its own checkpoint
    putback.py      making a path what an image says, beneath the root, no link followed

The list of code-bearing files is sandboxing/codebearing.py (the sandbox's protected
paths and the permission check use it too). Only fanotify and reader are imported by a
lower layer (the shim); the service is assembled by the daemon.
"""
