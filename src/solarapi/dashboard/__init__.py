"""The server-rendered dashboard for people: sign-up, keys, systems, usage."""
