"""Serving many followers: one read per chunk for all of them, and a bounded live rate.

The parts on their own, over real files and a real event loop; that every follower of a
real daemon gets every byte is in test_follow_output.py, the figures in bench/fanout.py.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agentd.runs.output import serving
from agentd.runs.output.serving import CHUNK, ChunkCache, Pacer


def _file(tmp_path: Path, size: int) -> tuple[int, bytes]:
    data = os.urandom(size)
    path = tmp_path / "out.output"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY), data


def test_readers_at_one_offset_share_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fd, data = _file(tmp_path, 3 * CHUNK + 100)
    reads: list[int] = []
    real_cached = serving._read_cached

    def cached(fd_: int, n: int, offset: int) -> bytes | None:
        reads.append(offset)
        return real_cached(fd_, n, offset)

    monkeypatch.setattr(serving, "_read_cached", cached)

    async def follow(cache: ChunkCache) -> bytes:
        got, offset = bytearray(), 0
        while offset < len(data):
            chunk = await cache.read(("s", "b1"), fd, offset, len(data))
            got += chunk
            offset += len(chunk)
        return bytes(got)

    async def main() -> None:
        cache = ChunkCache()
        results = await asyncio.gather(*(follow(cache) for _ in range(16)))
        assert results == [data] * 16
        # Four chunks, each read once whatever the number of readers.
        assert sorted(reads) == [0, CHUNK, 2 * CHUNK, 3 * CHUNK]

    try:
        asyncio.run(main())
    finally:
        os.close(fd)


def test_a_chunk_read_short_is_read_again_once_the_file_grew(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, CHUNK)

    async def main() -> None:
        cache = ChunkCache()
        # As if the file had 100 bytes when the first reader came.
        assert await cache.read(("s", "b1"), fd, 0, 100) == data[:100]
        assert await cache.read(("s", "b1"), fd, 0, CHUNK) == data
        # Mid-chunk readers read to the boundary, then meet the others on whole chunks.
        assert await cache.read(("s", "b1"), fd, 10, CHUNK) == data[10:]

    try:
        asyncio.run(main())
    finally:
        os.close(fd)


def test_the_cache_is_bounded_in_bytes(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 10 * CHUNK)

    async def main() -> None:
        cache = ChunkCache(max_bytes=3 * CHUNK)
        for i in range(10):
            assert (
                await cache.read(("s", "b1"), fd, i * CHUNK, len(data))
                == data[i * CHUNK : (i + 1) * CHUNK]
            )
        assert cache._bytes <= 3 * CHUNK and len(cache._recent) == 3

    try:
        asyncio.run(main())
    finally:
        os.close(fd)


def test_the_pacer_bounds_live_bytes_and_lets_go_at_the_end() -> None:
    async def main() -> None:
        pacer = Pacer(rate=4 << 20, burst=1 << 20)
        # 1 MB burst, then 3 MB more at 4 MB/s: about 0.75 s for 4 MB.
        t = time.monotonic()
        for _ in range(16):
            await pacer.take(256 << 10, lambda: False)
        took = time.monotonic() - t
        assert 0.6 < took < 3, took
        # The command ends: a reader in debt goes at once, and gives back what it did
        # not wait for.
        ended = False

        async def end_soon() -> None:
            # Runs once the reader waits: in debt, for its turn (seconds away).
            nonlocal ended
            assert pacer._tokens < 0
            ended = True

        t = time.monotonic()
        await asyncio.gather(pacer.take(8 << 20, lambda: ended), end_soon())
        assert time.monotonic() - t < 0.5
        assert pacer._tokens > -(1 << 20)

    asyncio.run(main())


def test_a_chunk_is_encoded_once_for_all_its_followers() -> None:
    from agentd.runs.output.serving import Chunk, EncodedChunks
    from agentd_client.v1 import agentd_pb2 as pb

    encoded = EncodedChunks(keep=2)
    data = os.urandom(1000)
    first = encoded.get("s", Chunk(4096, data, "b1", False))
    assert encoded.get("s", Chunk(4096, bytes(data), "b1", False)) is first
    assert pb.OutputChunk.FromString(first) == pb.OutputChunk(
        offset=4096, data=data, output_id="b1", done=False
    )
    # Another session's output of that id, or a shorter read at that offset: not the same.
    assert encoded.get("t", Chunk(4096, data, "b1", False)) is not first
    assert (
        pb.OutputChunk.FromString(encoded.get("s", Chunk(4096, data[:10], "b1", False))).data
        == data[:10]
    )
    # The end carries `done`, never taken for a data chunk.
    end = pb.OutputChunk.FromString(encoded.get("s", Chunk(5096, b"", "b1", True)))
    assert end.done and end.offset == 5096 and not end.data
