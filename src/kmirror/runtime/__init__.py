"""The only layer that touches sockets, files, clocks and asyncio."""
