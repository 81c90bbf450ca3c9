"""The advisor daemon: HTTP over a Unix socket, its scheduled jobs, and its client transport."""
